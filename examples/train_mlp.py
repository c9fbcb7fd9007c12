"""Train a typed tensor-parallel MLP on 4 local gloo ranks (2 dp x 2 tp).

Column-parallel then row-parallel linear (Megatron style), with data
parallelism on ``dp``, in both forms of the type cycle (docs/spec.md#loss-rule):

* ``--sp`` off: activations are ``I@tp``; entry ``convert(I,R)``, exit
  ``all_reduce(P,I)`` (Megatron's copy_to / reduce_from).
* ``--sp`` on: activations are ``S(0)@tp`` (sequence parallel); entry
  ``all_gather(S(0),R)``, exit ``reduce_scatter(P,S(0))``.

Every parameter is ``I@dp`` and enters the computation through
``convert(I,R)`` on ``dp``, whose backward all-reduces its gradient (what
DDP does).  The loss is ``P@dp`` (and ``I@tp`` or ``P@tp``).

Each step prints the parallel loss and the loss of the same model trained in
one process without parallelism; the run exits nonzero if they differ.

    python examples/train_mlp.py [--sp] [--steps N]
    torchrun --nproc-per-node 4 examples/train_mlp.py [--sp]
"""

import argparse
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.multiprocessing.spawn import start_processes

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import dp, tp

SEQ, BATCH, HIDDEN, FFN = 4, 4, 6, 8
LR = 0.5
Params = dict[str, torch.Tensor]


# --------------------------------------------------------------------------
# The model, unparallelised (the reference) and typed
# --------------------------------------------------------------------------


def init_params(seed: int = 0) -> Params:
    """Full parameters: w1 [FFN, HIDDEN], b1 [FFN], w2 [HIDDEN, FFN], b2 [HIDDEN]."""
    gen = torch.Generator().manual_seed(seed)
    shapes = {"w1": (FFN, HIDDEN), "b1": (FFN,), "w2": (HIDDEN, FFN), "b2": (HIDDEN,)}
    return {name: torch.randn(shape, generator=gen, dtype=torch.float64) / 2 for name, shape in shapes.items()}


def make_batch(step: int) -> torch.Tensor:
    """The global batch of a step: [SEQ, BATCH, HIDDEN]."""
    gen = torch.Generator().manual_seed(1000 + step)
    return torch.randn(SEQ, BATCH, HIDDEN, generator=gen, dtype=torch.float64)


def reference_loss(params: Params, x: torch.Tensor) -> torch.Tensor:
    y = F.gelu(x @ params["w1"].T + params["b1"]) @ params["w2"].T + params["b2"]
    return (y**2).sum() / y.numel()


def shard_params(full: Params, tp_index: int, tp_size: int) -> Params:
    """This rank's parameters: w1, b1 split on FFN (column-parallel), w2 on FFN (row-parallel)."""
    return {
        "w1": full["w1"].chunk(tp_size, 0)[tp_index].clone(),  # S(0)@tp, I@dp
        "b1": full["b1"].chunk(tp_size, 0)[tp_index].clone(),  # S(0)@tp, I@dp
        "w2": full["w2"].chunk(tp_size, 1)[tp_index].clone(),  # S(1)@tp, I@dp
        "b2": full["b2"].clone(),  # I@tp, I@dp
    }


def shard_batch(x: torch.Tensor, dp_index: int, tp_index: int, sequence_parallel: bool) -> torch.Tensor:
    """This rank's input: batch split over 2 dp ranks; sequence over 2 tp ranks when SP is on."""
    mine = x.chunk(2, 1)[dp_index]
    return mine.chunk(2, 0)[tp_index] if sequence_parallel else mine


def _enter_dp(p: Tensor[I@dp]) -> Tensor[R@dp]:
    """A dp-invariant parameter entering per-rank compute; backward all-reduces its grad."""
    return spmd.convert(p, dp, src=I, dst=R)


def mlp_loss(
    x: Tensor[I@tp, S(1)@dp],
    w1: Tensor[S(0)@tp, I@dp],
    b1: Tensor[S(0)@tp, I@dp],
    w2: Tensor[S(1)@tp, I@dp],
    b2: Tensor[I@tp, I@dp],
) -> Tensor[I@tp, P@dp]:
    """SP off: I@tp activations (copy_to / reduce_from).

    The row-parallel product is each rank's part of the sum, so the exit
    all-reduce takes it as V (the implicit reinterpret(V,P)).
    """
    h: Tensor[R@tp, S(1)@dp] = spmd.convert(x, tp, src=I, dst=R)
    a: Tensor[V@tp, S(1)@dp] = F.gelu(h @ _enter_dp(w1).T + _enter_dp(b1))
    y: Tensor[I@tp, S(1)@dp] = spmd.all_reduce(a @ _enter_dp(w2).T, tp, src=V, dst=I) + _enter_dp(b2)
    return spmd.reinterpret((y**2).sum() / (SEQ * BATCH * HIDDEN), dp, src=V, dst=P)


def mlp_loss_sp(
    x: Tensor[S(0)@tp, S(1)@dp],
    w1: Tensor[S(0)@tp, I@dp],
    b1: Tensor[S(0)@tp, I@dp],
    w2: Tensor[S(1)@tp, I@dp],
    b2: Tensor[I@tp, I@dp],
) -> Tensor[P@tp, P@dp]:
    """SP on: S(0)@tp activations (all_gather in, reduce_scatter out)."""
    h: Tensor[R@tp, S(1)@dp] = spmd.all_gather(x, tp, src=S(0), dst=R)
    a: Tensor[V@tp, S(1)@dp] = F.gelu(h @ _enter_dp(w1).T + _enter_dp(b1))
    out: Tensor[S(0)@tp, S(1)@dp] = spmd.reduce_scatter(a @ _enter_dp(w2).T, tp, src=V, dst=S(0))
    y: Tensor[V@tp, S(1)@dp] = out + spmd.convert(_enter_dp(b2), tp, src=I, dst=R)
    local: Tensor[V@tp, V@dp] = (y**2).sum() / (SEQ * BATCH * HIDDEN)
    return spmd.reinterpret(spmd.reinterpret(local, tp, src=V, dst=P), dp, src=V, dst=P)


def parallel_loss(params: Params, x: torch.Tensor, sequence_parallel: bool) -> torch.Tensor:
    loss = mlp_loss_sp if sequence_parallel else mlp_loss
    return loss(x, params["w1"], params["b1"], params["w2"], params["b2"])


def global_loss(loss: torch.Tensor, sequence_parallel: bool) -> float:
    """The value of a P loss: one all-reduce on the flattened (dp, tp) group, or on dp."""
    with torch.no_grad():
        if sequence_parallel:
            return spmd.all_reduce(loss, (dp, tp), src=P, dst=I).item()
        return spmd.all_reduce(loss, dp, src=P, dst=I).item()


# --------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------


def sgd(params: Params) -> None:
    with torch.no_grad():
        for name, p in params.items():
            if p.grad is None:
                raise RuntimeError(f"parameter {name} got no gradient")
            p -= LR * p.grad
            p.grad = None


def train(steps: int, sequence_parallel: bool) -> bool:
    """Train both models on this rank; rank 0 prints. True when all losses match."""
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    spmd.bind_mesh(mesh)
    dp_index, tp_index = mesh.get_local_rank("dp"), mesh.get_local_rank("tp")
    full = {k: v.requires_grad_() for k, v in init_params().items()}
    mine = {k: v.detach().requires_grad_() for k, v in shard_params(full, tp_index, 2).items()}
    ok = True
    for step in range(steps):
        batch = make_batch(step)
        loss = parallel_loss(mine, shard_batch(batch, dp_index, tp_index, sequence_parallel), sequence_parallel)
        loss.backward()
        expected = reference_loss(full, batch)
        expected.backward()
        got = global_loss(loss, sequence_parallel)
        same = abs(got - expected.item()) <= 1e-9 * max(1.0, abs(expected.item()))
        ok &= same
        if dist.get_rank() == 0:
            print(f"step {step}: loss {got:.12f}  reference {expected.item():.12f}  {'ok' if same else 'DIFFERENT'}")
        sgd(mine)
        sgd(full)
    spmd.unbind()
    return ok


def _worker(rank: int, port: int, steps: int, sequence_parallel: bool, results: "mp.Queue[bool]") -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="4")
    results.put(_run(steps, sequence_parallel))


def _run(steps: int, sequence_parallel: bool) -> bool:
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    try:
        ok = train(steps, sequence_parallel)
        dist.barrier()  # leave together: a rank that left early would break the others' connections
        return ok
    finally:
        dist.destroy_process_group()


def _spawn(steps: int, sequence_parallel: bool) -> bool:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    results: "mp.Queue[bool]" = ctx.Queue()
    start_processes(_worker, args=(port, steps, sequence_parallel, results), nprocs=4, start_method="spawn")
    return all(results.get() for _ in range(4))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sp", action="store_true", help="sequence parallel (S(0)@tp activations)")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args(argv)
    under_torchrun = "LOCAL_RANK" in os.environ
    ok = _run(args.steps, args.sp) if under_torchrun else _spawn(args.steps, args.sp)
    if not ok:
        print("parallel and reference losses differ", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
