"""A training step of the typed GPT example against the same model with raw Megatron-style comms.

    .venv/bin/python scripts/bench_step.py [--blocks 6] [--steps-per-block 5] [--raw-out-of-place]
        [--device cpu|cuda] [--nccl | --fake] [--default-malloc]

Four local gloo ranks (2 dp x 2 tp) build ``examples/gpt/tp_gpt.py``'s model
once, on CPU tensors or, with ``--device cuda``, on the GPU (rank ``r`` on
GPU ``r`` modulo the GPUs there are: gloo ranks may share one).  ``--nccl``
runs one NCCL rank on one GPU instead (1 dp x 1 tp: NCCL needs a GPU per
rank), whose collectives are real NCCL calls over a group of one.  ``--fake`` runs
rank 0 of the 2 x 2 world alone on torch's fake process group, whose
collectives return at once without moving data: no rank waits for another,
so the times are this rank's own work, undisturbed by the other ranks
competing for the cores (the loss and gradients are then not a real step's,
and the difference column means nothing).  The "raw" variant runs the very
same model with the module-level name
``spmd`` of ``tp_gpt`` pointed at :class:`MegatronComm`: every typed
collective or cast the model calls is served by a hand-written
``torch.autograd.Function`` calling ``torch.distributed`` directly, as
Megatron-LM's ``tensor_parallel/mappings.py`` does (casts with no
communication, ``reinterpret``, become the identity), and ``spmd.linear``
(the model's global-SPMD parallel linears; at runtime an argument check and
``F.linear``) by ``F.linear``.  A step is forward,
backward and the dp gradient all-reduce; weights are not updated, so every
step does the same work.

Every rank runs one intra-op thread and fixes glibc's malloc thresholds first (``scripts/steady_malloc.py``;
``--default-malloc`` leaves them moving), so that both variants reuse freed
buffers instead of mapping fresh pages for each.

The two variants are first checked to give the same loss and gradients, then
timed in alternating blocks (the order flips every block, a barrier before
each step); a step's wall time is the slowest rank's, its CPU time the
ranks' mean main-thread CPU time (see :func:`timed_steps`); the table gives
medians.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "gpt"))

import tp_gpt
from gloo_launch import free_port, spawn
from steady_malloc import add_option, steady_malloc

import spmd_stubs as spmd
from spmd_stubs import I, P, Pmax, R, S, V
from spmd_stubs.axes import dp, tp

MESH = (2, 2)  # (dp, tp)
DEVICE = torch.device("cpu")
"""Where this rank's model and batch live (set by :func:`rank_main`)."""
WARMUP = 5
CONFIG = tp_gpt.Config(vocab=512, hidden=128, heads=8, ffn=512, layers=2, seq=64, batch=8)
Group = Optional[dist.ProcessGroup]


# --------------------------------------------------------------------------
# Megatron-style mappings: torch.distributed calls, hand-written backwards
# --------------------------------------------------------------------------


IN_PLACE = True
"""Megatron's tensor-parallel all-reduces reduce the caller's tensor in place;
``--raw-out-of-place`` reduces a copy instead, as the typed ``all_reduce``
(which never modifies its input) must.  The gradient sync is in place on both
sides (``spmd.all_reduce_``)."""


def _reduce(x: torch.Tensor, group: Group) -> torch.Tensor:
    """All-reduce in place (Megatron's ``_reduce``), or on a copy (see ``IN_PLACE``)."""
    if not IN_PLACE:
        x = x.clone(memory_format=torch.contiguous_format)
    dist.all_reduce(x, group=group)
    return x


def _gather_along_first_dim(x: torch.Tensor, group: Group) -> torch.Tensor:
    """Concatenate every rank's ``x`` on dim 0."""
    out = x.new_empty((x.shape[0] * dist.get_world_size(group), *x.shape[1:]))
    dist.all_gather_single(out, x.contiguous(), group=group)
    return out


def _reduce_scatter_along_first_dim(x: torch.Tensor, group: Group) -> torch.Tensor:
    """Sum over the ranks, rank k keeping part k of dim 0."""
    out = x.new_empty((x.shape[0] // dist.get_world_size(group), *x.shape[1:]))
    dist.reduce_scatter_single(out, x.contiguous(), group=group)
    return out


class _CopyToModelParallelRegion(torch.autograd.Function):
    """Identity forward, all-reduce backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Group) -> torch.Tensor:
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return _reduce(grad, ctx.group), None


class _ReduceFromModelParallelRegion(torch.autograd.Function):
    """All-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Group) -> torch.Tensor:
        return _reduce(x, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


class _GatherFromSequenceParallelRegion(torch.autograd.Function):
    """All-gather (dim 0) forward, reduce-scatter backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Group) -> torch.Tensor:
        ctx.group = group
        return _gather_along_first_dim(x, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return _reduce_scatter_along_first_dim(grad, ctx.group), None


class _ReduceScatterToSequenceParallelRegion(torch.autograd.Function):
    """Reduce-scatter (dim 0) forward, all-gather backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Group) -> torch.Tensor:
        ctx.group = group
        return _reduce_scatter_along_first_dim(x, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return _gather_along_first_dim(grad, ctx.group), None


def _reduce_in_place(x: torch.Tensor, group: Group) -> torch.Tensor:
    """DDP's gradient sync: an in-place all-reduce of the gradient."""
    dist.all_reduce(x, group=group)
    return x


def _reduce_max(x: torch.Tensor, group: Group) -> torch.Tensor:
    """Megatron's vocab-parallel row max: an in-place MAX all-reduce of a detached value."""
    dist.all_reduce(x, op=dist.ReduceOp.MAX, group=group)
    return x


def _identity(x: torch.Tensor, group: Group) -> torch.Tensor:
    """A cast that moves no data: raw code writes nothing there."""
    return x


Raw = Callable[[torch.Tensor, Group], torch.Tensor]

# (operation, src, dst) as the model calls it -> the raw function serving it.
RAW: dict[tuple[str, Any, Any], Raw] = {
    ("convert", I, R): _CopyToModelParallelRegion.apply,
    ("all_reduce", P, I): _ReduceFromModelParallelRegion.apply,
    ("all_reduce_", P, R): _reduce_in_place,  # the dp gradient sync
    ("all_gather", S(0), R): _GatherFromSequenceParallelRegion.apply,
    ("reduce_scatter", P, S(0)): _ReduceScatterToSequenceParallelRegion.apply,
    ("all_reduce", Pmax, R): _reduce_max,
    ("reinterpret", V, Pmax): _identity,
    ("reinterpret", V, P): _identity,
}


class MegatronComm:
    """Stands in for the ``spmd`` module inside ``tp_gpt``: same calls, raw implementations."""

    def __init__(self) -> None:
        self.groups = {dp: spmd.group_of(dp), tp: spmd.group_of(tp)}

    def _call(self, op: str, x: torch.Tensor, axis: Any, src: Any, dst: Any) -> torch.Tensor:
        """The raw function for this call (a KeyError names a call the table lacks)."""
        return RAW[(op, src, dst)](x, self.groups[axis])

    def all_reduce(self, x: torch.Tensor, axis: Any, *, src: Any, dst: Any) -> torch.Tensor:
        return self._call("all_reduce", x, axis, src, dst)

    def all_reduce_(self, x: torch.Tensor, axis: Any, *, src: Any, dst: Any) -> torch.Tensor:
        return self._call("all_reduce_", x, axis, src, dst)

    def all_gather(self, x: torch.Tensor, axis: Any, *, src: Any, dst: Any) -> torch.Tensor:
        return self._call("all_gather", x, axis, src, dst)

    def reduce_scatter(self, x: torch.Tensor, axis: Any, *, src: Any, dst: Any) -> torch.Tensor:
        return self._call("reduce_scatter", x, axis, src, dst)

    def convert(self, x: torch.Tensor, axis: Any, *, src: Any, dst: Any) -> torch.Tensor:
        return self._call("convert", x, axis, src, dst)

    def reinterpret(self, x: torch.Tensor, axis: Any, *, src: Any, dst: Any) -> torch.Tensor:
        return self._call("reinterpret", x, axis, src, dst)

    def linear(
        self, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, *, out_partial_axes: Any = None
    ) -> torch.Tensor:
        """``spmd.linear`` without the type: the local product (a partial result is implicit in raw code)."""
        return F.linear(x, weight, bias)


@contextlib.contextmanager
def model_comms(comms: Any) -> Iterator[None]:
    """Run ``tp_gpt`` with ``comms`` as its ``spmd`` module."""
    saved = tp_gpt.spmd
    tp_gpt.spmd = comms
    try:
        yield
    finally:
        tp_gpt.spmd = saved


# --------------------------------------------------------------------------
# One rank: build, check, time
# --------------------------------------------------------------------------


@dataclasses.dataclass
class Setup:
    """This rank's model and micro-batch."""

    model: tp_gpt.GPT
    tokens: torch.Tensor
    targets: torch.Tensor


def build(cfg: tp_gpt.Config, dp_rank: int, tp_rank: int) -> Setup:
    """The model in float32 and this dp rank's micro-batch (every tp rank sees all of it)."""
    dp_size, tp_size = MESH
    model = tp_gpt.GPT(cfg, tp_gpt.init_full_params(cfg), tp_rank, tp_size).float().to(DEVICE)
    gen = torch.Generator().manual_seed(1000)
    tokens = torch.randint(cfg.vocab, (cfg.seq, cfg.batch), generator=gen).to(DEVICE)
    targets = torch.randint(cfg.vocab, (cfg.seq, cfg.batch), generator=gen).to(DEVICE)
    return Setup(model, tokens.chunk(dp_size, 1)[dp_rank], targets.chunk(dp_size, 1)[dp_rank])


def step(setup: Setup) -> torch.Tensor:
    """Forward, backward, dp gradient sync; the loss."""
    for param in setup.model.parameters():
        param.grad = None
    loss = tp_gpt.gpt_loss(setup.model, setup.tokens, setup.targets, MESH[0])
    loss.backward()
    tp_gpt.sync_data_parallel_grads(setup.model)
    return loss.detach()


def _loss_and_grads(setup: Setup, comms: Any) -> list[torch.Tensor]:
    with model_comms(comms):
        loss = step(setup)
    return [loss] + [p.grad.clone() for p in setup.model.parameters() if p.grad is not None]


def max_difference(setup: Setup, raw: MegatronComm) -> float:
    """Largest difference between the typed and raw step's loss and gradients, this rank."""
    typed_out, raw_out = _loss_and_grads(setup, spmd), _loss_and_grads(setup, raw)
    assert len(typed_out) == len(raw_out)
    return max((a - b).abs().max().item() for a, b in zip(typed_out, raw_out))


def timed_steps(setup: Setup, comms: Any, count: int) -> list[tuple[float, float]]:
    """(wall, main-thread CPU) seconds per step, ``count`` steps, a barrier before each
    and, on a GPU, its work finished at the end of each.

    The main thread's CPU time is the rank's own work, Python and kernels
    (gloo runs the collectives on its own threads while the main thread
    blocks): where other jobs share the cores it is far steadier than the
    wall time, which also counts the time spent waiting for a core.
    """
    times = []
    with model_comms(comms):
        for _ in range(count):
            dist.barrier()
            start, start_cpu = time.perf_counter(), time.thread_time()
            step(setup)
            if DEVICE.type == "cuda":
                torch.cuda.synchronize()
            times.append((time.perf_counter() - start, time.thread_time() - start_cpu))
    return times


def bench_config(cfg: tp_gpt.Config, ranks: tuple[int, int], blocks: int, per_block: int) -> dict[str, Any]:
    """Check, warm up, then time typed and raw in alternating blocks; ``ranks`` is (dp, tp)."""
    setup, raw = build(cfg, *ranks), MegatronComm()
    variants = {"typed": spmd, "raw": raw}
    difference = max_difference(setup, raw)
    for comms in variants.values():
        timed_steps(setup, comms, WARMUP)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for block in range(blocks):
        order = list(variants) if block % 2 == 0 else list(reversed(variants))
        for name in order:
            times[name] += timed_steps(setup, variants[name], per_block)
    return {"sp": cfg.sequence_parallel, "difference": difference, "times": times}


@dataclasses.dataclass(frozen=True)
class Run:
    """What every rank runs: the mesh, where the tensors live, how many steps, how raw all-reduces."""

    mesh: tuple[int, int]
    device: str
    blocks: int
    per_block: int
    in_place: bool
    steady_malloc: bool


def rank_main(run: Run) -> list[dict[str, Any]]:
    """Both SP modes on this rank, in one world."""
    global IN_PLACE, MESH, DEVICE
    IN_PLACE, MESH = run.in_place, run.mesh
    # One intra-op thread per rank, as torchrun sets for several ranks a node
    # (OMP_NUM_THREADS=1): with two, a step took 5.5 ms in one process and
    # 8.4 ms in the next, as the second thread got a core or not.
    torch.set_num_threads(1)
    steady_malloc(run.steady_malloc)
    if run.device == "cuda":
        DEVICE = torch.device("cuda", dist.get_rank() % torch.cuda.device_count())
        torch.cuda.set_device(DEVICE)
    mesh = init_device_mesh(DEVICE.type, MESH, mesh_dim_names=("dp", "tp"))
    spmd.bind_mesh(mesh)
    ranks = mesh.get_local_rank("dp"), mesh.get_local_rank("tp")
    try:
        return [
            bench_config(dataclasses.replace(CONFIG, sequence_parallel=sp), ranks, run.blocks, run.per_block)
            for sp in (False, True)
        ]
    finally:
        spmd.unbind()


def run_alone_on_nccl(fn: Callable[[Run], Any], run: Run) -> list[Any]:
    """``fn(run)`` here, as the one rank of an NCCL world on GPU 0; its result as the only rank's."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    try:
        return [fn(run)]
    finally:
        dist.destroy_process_group()


def run_alone_on_fake(fn: Callable[[Run], Any], run: Run) -> list[Any]:
    """``fn(run)`` here, as rank 0 of a fake-backend world of the mesh's size; its result as the only rank's."""
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend

    # The fake collectives leave their outputs unwritten: whatever memory they
    # got, denormal numbers included, whose arithmetic is many times slower.
    torch.set_flush_denormal(True)
    dist.init_process_group("fake", rank=0, world_size=run.mesh[0] * run.mesh[1], store=FakeStore())
    try:
        return [fn(run)]
    finally:
        dist.destroy_process_group()
        torch.set_flush_denormal(False)


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def slowest_rank(per_rank: list[list[float]]) -> list[float]:
    """Per step, the time of the slowest rank."""
    return [max(step_times) for step_times in zip(*per_rank)]


def mean_rank(per_rank: list[list[float]]) -> list[float]:
    """Per step, the mean over the ranks."""
    return [statistics.fmean(step_times) for step_times in zip(*per_rank)]


def table(mesh: tuple[int, int], per_rank: list[list[dict[str, Any]]]) -> list[str]:
    """Markdown rows: config; typed and raw median wall ms/step (slowest rank) and
    main-thread CPU ms/step (mean rank), their typed/raw ratios; max difference."""
    rows = [
        "| config | typed ms/step | raw ms/step | typed/raw | typed CPU ms/step | raw CPU ms/step "
        "| CPU typed/raw | max loss/grad difference |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for index, result in enumerate(per_rank[0]):
        wall, cpu = {}, {}
        for name in ("typed", "raw"):
            ranks = [rank[index]["times"][name] for rank in per_rank]
            wall[name] = 1e3 * statistics.median(slowest_rank([[w for w, _ in r] for r in ranks]))
            cpu[name] = 1e3 * statistics.median(mean_rank([[c for _, c in r] for r in ranks]))
        difference = max(rank[index]["difference"] for rank in per_rank)
        sp = "on" if result["sp"] else "off"
        rows.append(
            f"| {mesh[0]} dp x {mesh[1]} tp, SP {sp} | {wall['typed']:.1f} | {wall['raw']:.1f} | {wall['typed'] / wall['raw']:.3f} "
            f"| {cpu['typed']:.1f} | {cpu['raw']:.1f} | {cpu['typed'] / cpu['raw']:.3f} | {difference:.1e} |"
        )
    return rows


def load() -> str:
    """The machine's load average, for the report."""
    return "load average %.2f %.2f %.2f" % os.getloadavg()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--blocks", type=int, default=6, help="alternating blocks per variant")
    parser.add_argument("--steps-per-block", type=int, default=5)
    parser.add_argument(
        "--raw-out-of-place", action="store_true", help="raw all-reduces a copy, not the caller's tensor (as typed does)"
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the tensors live")
    add_option(parser)
    alone = parser.add_mutually_exclusive_group()
    alone.add_argument("--nccl", action="store_true", help="one NCCL rank on one GPU (implies --device cuda)")
    alone.add_argument("--fake", action="store_true", help="rank 0 alone on the fake process group (no waits)")
    args = parser.parse_args(argv)
    run = Run(
        mesh=(1, 1) if args.nccl else MESH,
        device="cuda" if args.nccl else args.device,
        blocks=args.blocks,
        per_block=args.steps_per_block,
        in_place=not args.raw_out_of_place,
        steady_malloc=not args.default_malloc,
    )
    backend = ("one NCCL rank" if args.nccl else "rank 0 alone on the fake process group" if args.fake
               else f"{run.mesh[0] * run.mesh[1]} gloo ranks")
    malloc = steady_malloc(run.steady_malloc)  # for the report; every rank fixes its own (rank_main)
    print(f"{CONFIG}, float32, {backend}, {run.device} tensors, {os.cpu_count()} cores, one thread a rank; {malloc}; before: {load()}", flush=True)
    if args.nccl:
        per_rank = run_alone_on_nccl(rank_main, run)
    elif args.fake:
        per_rank = run_alone_on_fake(rank_main, run)
    else:
        per_rank = spawn(rank_main, run, world_size=MESH[0] * MESH[1], timeout=1800)
    raw = "raw all-reduces on a copy" if args.raw_out_of_place else "raw all-reduces in place"
    print(f"after: {load()}; {args.blocks * args.steps_per_block} timed steps per variant, {WARMUP} warmup; {raw}")
    print("\n".join(table(run.mesh, per_rank)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
