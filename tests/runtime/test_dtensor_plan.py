"""The ``parallelize_module`` plan of examples/dtensor_plan on 4 gloo ranks, against the block in one process.

One gloo world runs two plans on a 4-rank ``tp`` mesh (``run_plan.run_rank``):

* the plan as written (``tp_plan.apply_tp``): the output, the input gradient
  and every parameter's gradient, made whole with DTensor's ``full_tensor()``,
  equal the unparallelised block's (same seed) to 1e-12;
* the same plan with ``ffn_norm`` (or ``attention_norm``) left out: it runs
  and its output is right, but the norm's weight stays a plain tensor whose
  gradient holds only this rank's tokens' part (the sequence-parallel norm
  bug, ``spmd-plan`` whose fix adds the entry back): the comparison must
  report that gradient, and only it;
* ``ffn_norm`` left out with its gradient all-reduced over tp by hand after
  ``backward`` (read as right: its weight ``R@tp``): everything matches;
* the feed-forward planned as torchtitan plans its MoE layer
  (``PrepareModuleInputOutput``: the sequence shard gathered into a local
  whole, ``w2``'s pending sum reduce-scattered back): everything matches;
  with ``w2`` all-reducing already (``spmd-plan``: it returns ``I@tp`` where
  ``P@tp`` is declared) the output is wrong.

``run_plan.py`` is also run as a user would.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from unittest import mock

import torch
import torch.distributed as dist
from spmd_world import gloo_tests
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor.parallel import (
    ParallelStyle,
    PrepareModuleInputOutput,
    RowwiseParallel,
    parallelize_module,
)

PLAN_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dtensor_plan"
sys.path.insert(0, str(PLAN_EXAMPLE))
import run_plan  # noqa: E402
import tp_plan  # noqa: E402
from llama_block import TransformerBlock  # noqa: E402

PARAMETERS = [
    "attention_norm.weight", "attention.wq.weight", "attention.wk.weight", "attention.wv.weight",
    "attention.wo.weight", "ffn_norm.weight", "feed_forward.w1.weight", "feed_forward.w2.weight",
    "feed_forward.w3.weight",
]
RESULTS = {"output", "input grad"} | {f"{name} grad" for name in PARAMETERS}


def _different(differences: dict[str, float]) -> dict[str, float]:
    """The results farther than the tolerance from the reference's."""
    assert differences.keys() == RESULTS, sorted(differences)
    return {name: error for name, error in differences.items() if error > run_plan.TOLERANCE}


def _apply_tp_with(changes: dict[str, ParallelStyle | None]) -> run_plan.Plan:
    """``tp_plan.apply_tp`` with the entries ``changes`` names given its style (None: left out of the plan)."""

    def apply(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
        def parallelize_changed(module: torch.nn.Module, mesh: DeviceMesh, plan: dict[str, ParallelStyle]) -> None:
            assert changes.keys() <= plan.keys(), f"{sorted(changes)} are not all in apply_tp's plan"
            changed = {key: changes.get(key, style) for key, style in plan.items()}
            parallelize_module(module, mesh, {key: style for key, style in changed.items() if style is not None})

        with mock.patch.object(tp_plan, "parallelize_module", parallelize_changed):
            tp_plan.apply_tp(block, tp_mesh)

    return apply


def _apply_tp_without(entry: str) -> run_plan.Plan:
    return _apply_tp_with({entry: None})


def _all_reduce_ffn_norm_gradients(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    for p in block.ffn_norm.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, group=tp_mesh.get_group())


def _feed_forward_as_a_moe_layer(w2: ParallelStyle) -> run_plan.Plan:
    return _apply_tp_with({
        "feed_forward": PrepareModuleInputOutput(
            input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),), use_local_input=True,
            output_layouts=(Partial(),), desired_output_layouts=(Shard(1),)),
        "feed_forward.w2": w2,
    })


def plan_matches_reference(mesh: DeviceMesh) -> None:
    different = _different(run_plan.run_rank())
    assert different == {}, f"different from the reference: {different}"


def plan_without_ffn_norm_gets_its_gradient_wrong(mesh: DeviceMesh) -> None:
    different = _different(run_plan.run_rank(_apply_tp_without("ffn_norm")))
    assert different.keys() == {"ffn_norm.weight grad"}, f"different from the reference: {different}"


def plan_without_attention_norm_gets_its_gradient_wrong(mesh: DeviceMesh) -> None:
    different = _different(run_plan.run_rank(_apply_tp_without("attention_norm")))
    assert different.keys() == {"attention_norm.weight grad"}, f"different from the reference: {different}"


def ffn_norm_gradient_all_reduced_by_hand_matches_reference(mesh: DeviceMesh) -> None:
    different = _different(run_plan.run_rank(_apply_tp_without("ffn_norm"), _all_reduce_ffn_norm_gradients))
    assert different == {}, f"different from the reference: {different}"


def feed_forward_prepared_as_a_moe_layer_matches_reference(mesh: DeviceMesh) -> None:
    different = _different(run_plan.run_rank(_feed_forward_as_a_moe_layer(RowwiseParallel(output_layouts=Partial()))))
    assert different == {}, f"different from the reference: {different}"


def feed_forward_all_reduced_before_its_reduce_scatter_gets_the_output_wrong(mesh: DeviceMesh) -> None:
    different = _different(run_plan.run_rank(_feed_forward_as_a_moe_layer(RowwiseParallel())))
    assert "output" in different, f"different from the reference: {different}"


CHECKS = {
    "plan_matches_reference": plan_matches_reference,
    "plan_without_ffn_norm_gets_its_gradient_wrong": plan_without_ffn_norm_gets_its_gradient_wrong,
    "plan_without_attention_norm_gets_its_gradient_wrong": plan_without_attention_norm_gets_its_gradient_wrong,
    "ffn_norm_gradient_all_reduced_by_hand_matches_reference": ffn_norm_gradient_all_reduced_by_hand_matches_reference,
    "feed_forward_prepared_as_a_moe_layer_matches_reference": feed_forward_prepared_as_a_moe_layer_matches_reference,
    "feed_forward_all_reduced_before_its_reduce_scatter_gets_the_output_wrong":
        feed_forward_all_reduced_before_its_reduce_scatter_gets_the_output_wrong,
}


gloo_world, test_gloo = gloo_tests(__name__, CHECKS)


def test_run_plan_script_exits_zero_and_prints_every_result() -> None:
    run = subprocess.run(
        [sys.executable, str(PLAN_EXAMPLE / "run_plan.py")], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [line for line in run.stdout.splitlines() if " max difference " in line]
    assert {line.split(" max difference ")[0].strip() for line in lines} == RESULTS, run.stdout
    assert all(line.endswith(" ok") for line in lines), run.stdout
