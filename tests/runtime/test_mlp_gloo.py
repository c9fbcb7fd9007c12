"""End to end: the typed column->row parallel MLP on 2 dp x 2 tp gloo ranks.

Parameter and input gradients, in both the SP=False and SP=True cycles, equal
those of the same model computed in one process without parallelism.  Also
runs ``examples/train_mlp.py`` as a user would.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from spmd_world import gloo_tests
from torch.distributed.device_mesh import DeviceMesh

import spmd_stubs as spmd

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
import train_mlp  # noqa: E402


def _grads_match_reference(mesh: DeviceMesh, sequence_parallel: bool) -> None:
    spmd.bind_mesh(mesh)
    try:
        d, t = mesh.get_local_rank("dp"), mesh.get_local_rank("tp")
        full = {k: v.requires_grad_() for k, v in train_mlp.init_params().items()}
        batch = train_mlp.make_batch(0).requires_grad_()
        train_mlp.reference_loss(full, batch).backward()
        mine = {k: v.detach().requires_grad_() for k, v in train_mlp.shard_params(full, t, 2).items()}
        x = train_mlp.shard_batch(batch.detach(), d, t, sequence_parallel).requires_grad_()
        train_mlp.parallel_loss(mine, x, sequence_parallel).backward()
        expected = train_mlp.shard_params({k: v.grad for k, v in full.items()}, t, 2)
        for name in expected:
            torch.testing.assert_close(mine[name].grad, expected[name], msg=lambda m: f"{name}: {m}")
        torch.testing.assert_close(x.grad, train_mlp.shard_batch(batch.grad, d, t, sequence_parallel))
        assert dist.get_world_size() == 4
    finally:
        spmd.unbind()


def sp_false_gradients(mesh: DeviceMesh) -> None:
    _grads_match_reference(mesh, sequence_parallel=False)


def sp_true_gradients(mesh: DeviceMesh) -> None:
    _grads_match_reference(mesh, sequence_parallel=True)


CHECKS = {"sp_false_gradients": sp_false_gradients, "sp_true_gradients": sp_true_gradients}


gloo_world, test_gloo = gloo_tests(__name__, CHECKS)


@pytest.mark.parametrize("flags", [[], ["--sp"]], ids=["sp_off", "sp_on"])
def test_example_trains_and_matches_reference(flags: list[str]) -> None:
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / "train_mlp.py"), "--steps", "3", *flags],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [line for line in run.stdout.splitlines() if line.startswith("step ")]
    assert len(lines) == 3 and all(line.endswith(" ok") for line in lines), run.stdout
