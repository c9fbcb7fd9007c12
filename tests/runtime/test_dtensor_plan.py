"""The ``parallelize_module`` plan of examples/dtensor_plan on 4 gloo ranks, against the block in one process.

One gloo world runs two plans on a 4-rank ``tp`` mesh (``run_plan.run_rank``):

* the plan as written (``tp_plan.apply_tp``): the output, the input gradient
  and every parameter's gradient, made whole with DTensor's ``full_tensor()``,
  equal the unparallelised block's (same seed) to 1e-12;
* the same plan with ``ffn_norm`` (or ``attention_norm``) left out: it runs
  and its output is right, but the norm's weight stays a plain tensor whose
  gradient holds only this rank's tokens' part (the sequence-parallel norm
  bug, ``spmd-plan`` whose fix adds the entry back): the comparison must
  report that gradient, and only it.

``run_plan.py`` is also run as a user would.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from unittest import mock

import torch
from spmd_world import gloo_tests
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor.parallel import parallelize_module

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


def _apply_tp_without(entry: str) -> run_plan.Plan:
    """``tp_plan.apply_tp`` with ``entry`` left out of its plan."""

    def apply(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
        def parallelize_without(module: torch.nn.Module, mesh: DeviceMesh, plan: dict[str, object]) -> None:
            assert entry in plan, f"{entry} is not in apply_tp's plan"
            parallelize_module(module, mesh, {k: v for k, v in plan.items() if k != entry})

        with mock.patch.object(tp_plan, "parallelize_module", parallelize_without):
            tp_plan.apply_tp(block, tp_mesh)

    return apply


def plan_matches_reference(mesh: DeviceMesh) -> None:
    different = _different(run_plan.run_rank())
    assert different == {}, f"different from the reference: {different}"


def plan_without_ffn_norm_gets_its_gradient_wrong(mesh: DeviceMesh) -> None:
    different = _different(run_plan.run_rank(_apply_tp_without("ffn_norm")))
    assert different.keys() == {"ffn_norm.weight grad"}, f"different from the reference: {different}"


def plan_without_attention_norm_gets_its_gradient_wrong(mesh: DeviceMesh) -> None:
    different = _different(run_plan.run_rank(_apply_tp_without("attention_norm")))
    assert different.keys() == {"attention_norm.weight grad"}, f"different from the reference: {different}"


CHECKS = {
    "plan_matches_reference": plan_matches_reference,
    "plan_without_ffn_norm_gets_its_gradient_wrong": plan_without_ffn_norm_gets_its_gradient_wrong,
    "plan_without_attention_norm_gets_its_gradient_wrong": plan_without_attention_norm_gets_its_gradient_wrong,
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
