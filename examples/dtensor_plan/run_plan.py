"""Run the block's tensor-parallel plan on 4 local gloo ranks against the block in one process.

Every rank builds the block from one seed and applies the plan
(:func:`tp_plan.apply_tp`) on a 4-rank ``tp`` mesh; it feeds the block its
piece of the sequence and back-propagates its piece of an output gradient.
The same block, built from the same seed, runs unparallelised on the whole
batch.  The output, the input gradient and every parameter's gradient, made
whole with DTensor's ``full_tensor()``, must equal the reference's.  The run
prints the largest difference of each and exits nonzero if any differs.

    python examples/dtensor_plan/run_plan.py
    torchrun --nproc-per-node 4 examples/dtensor_plan/run_plan.py
"""

from __future__ import annotations

import os
import socket
import sys
from datetime import timedelta
from typing import Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from llama_block import ModelArgs, TransformerBlock
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import DTensor
from torch.multiprocessing.spawn import start_processes
from tp_plan import apply_tp

import spmd_stubs as spmd
from spmd_stubs import S
from spmd_stubs.axes import tp

WORLD_SIZE = 4
BATCH, SEQ = 2, 8
SEED = 0
TOLERANCE = 1e-12  # float64 throughout: the parallel sums differ from the reference's in the last bits only

Plan = Callable[[TransformerBlock, DeviceMesh], None]
AfterBackward = Callable[[TransformerBlock, DeviceMesh], None]
Results = dict[str, torch.Tensor]


def make_block() -> TransformerBlock:
    torch.manual_seed(SEED)
    return TransformerBlock(ModelArgs()).double()


def make_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """The block's input and the gradient of its output, ``[batch, seq, dim]``."""
    gen = torch.Generator().manual_seed(SEED + 1)
    x, grad_out = torch.randn(2, BATCH, SEQ, ModelArgs().dim, generator=gen, dtype=torch.float64)
    return x, grad_out


def reference() -> Results:
    """Output, input gradient and parameter gradients of the block in one process."""
    block = make_block()
    x, grad_out = make_batch()
    x.requires_grad_()
    out = block(x)
    out.backward(grad_out)
    assert x.grad is not None
    return {"output": out.detach(), "input grad": x.grad} | _param_grads(block)


def parallel(tp_mesh: DeviceMesh, plan: Plan = apply_tp, after_backward: AfterBackward | None = None) -> Results:
    """The same as :func:`reference`, computed by the block sharded by ``plan`` over ``tp_mesh`` (and
    ``after_backward`` run on it, as a training step would before reading the gradients)."""
    block = make_block()
    plan(block, tp_mesh)
    x, grad_out = make_batch()
    rank, size = tp_mesh.get_local_rank(), tp_mesh.size()
    my_x = x.chunk(size, dim=1)[rank].requires_grad_()
    my_out = block(my_x)
    my_out.backward(grad_out.chunk(size, dim=1)[rank])
    if after_backward is not None:
        after_backward(block, tp_mesh)
    assert my_x.grad is not None
    # The block takes and returns this rank's piece of the sequence: S(1)@tp.
    whole = {
        name: spmd.from_local(piece.detach(), tp_mesh, S(1)@tp).full_tensor()
        for name, piece in (("output", my_out), ("input grad", my_x.grad))
    }
    return whole | _param_grads(block)


def _param_grads(block: TransformerBlock) -> Results:
    """Each parameter's gradient, whole; a parameter the plan left a plain tensor gives this rank's."""
    grads = {}
    for name, param in block.named_parameters():
        grad = param.grad
        assert grad is not None, name
        grads[f"{name} grad"] = grad.full_tensor() if isinstance(grad, DTensor) else grad
    return grads


def differences(got: Results, expected: Results) -> dict[str, float]:
    """The largest difference of each result from the reference, relative to its largest entry."""
    assert got.keys() == expected.keys(), (sorted(got), sorted(expected))
    return {
        name: ((got[name] - want).abs().max() / want.abs().max().clamp(min=1.0)).item()
        for name, want in expected.items()
    }


def run_rank(plan: Plan = apply_tp, after_backward: AfterBackward | None = None) -> dict[str, float]:
    """On a joined gloo world: the plan's differences from the reference."""
    tp_mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("tp",))
    return differences(parallel(tp_mesh, plan, after_backward), reference())


def _worker(rank: int, port: int, results: "mp.Queue[dict[str, float]]") -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(WORLD_SIZE))
    results.put(_joined())


def _joined() -> dict[str, float]:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    try:
        found = run_rank()
        dist.barrier()  # leave together: a rank that left early would break the others' connections
        return found
    finally:
        dist.destroy_process_group()


def _spawn() -> list[dict[str, float]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # fork: the ranks inherit the torch this process imported (no torch op has run
    # yet) instead of importing it again, most of a spawned world's start-up.
    ctx = mp.get_context("fork")
    results: "mp.Queue[dict[str, float]]" = ctx.Queue()
    start_processes(_worker, args=(port, results), nprocs=WORLD_SIZE, start_method="fork")
    return [results.get() for _ in range(WORLD_SIZE)]


def main() -> int:
    under_torchrun = "LOCAL_RANK" in os.environ
    per_rank = [_joined()] if under_torchrun else _spawn()
    worst = {name: max(found[name] for found in per_rank) for name in per_rank[0]}
    ok = all(error <= TOLERANCE for error in worst.values())
    if not under_torchrun or os.environ["RANK"] == "0":
        for name, error in worst.items():
            print(f"{name:28s} max difference {error:.1e}  {'ok' if error <= TOLERANCE else 'DIFFERENT'}")
        print("the plan computes the reference's output and gradients" if ok else "MISMATCH against the reference")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
