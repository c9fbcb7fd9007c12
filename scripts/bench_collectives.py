"""Typed collectives against the raw torch.distributed calls, on local ranks or in the simulated world.

    .venv/bin/python scripts/bench_collectives.py [--rounds 11] [--calls 16] [--min-size 1024] [--max-size 16777216] [--validate]
        [--control] [--layers]
        [--world 4] [--backend gloo|nccl] [--device cpu|cuda] [--simulated] [--default-malloc]

By default 4 local gloo ranks on CPU tensors.  ``--device cuda`` puts the
tensors on the GPU (rank ``r`` on GPU ``r`` modulo the GPUs there are, so
gloo ranks share one GPU; NCCL needs a GPU per rank, e.g. ``--world 1`` on
one GPU), and every timed batch ends with ``torch.cuda.synchronize()``.
``--simulated`` runs one process, torch's ``LocalTensorMode`` over its
``fake`` process group, each tensor holding every rank's part: typed and raw
calls are the same calls there, emulated.

For each per-rank input size (1 KiB .. 16 MiB of float32 by default; powers
of 4 between ``--min-size`` and ``--max-size`` bytes) and each collective,
typed and raw calls alternate one by one in rounds (256 KiB of each side's
calls a round, and at least ``--calls``), the order of each pair flipped
from the pair before, a barrier before each round, every call timed on its
own.  Timing whole batches of one side, then of the other, let the two
sides drift apart with the machine's state: the A/A control below read
0.93-1.11 that way on 2 cores, 0.99 interleaved.  The table gives, per
call, the median over the rounds of the wall time (the slowest rank's) and
of the main thread's CPU time (the ranks' mean; gloo communicates on its
own threads, so this is the call's own work, steadier than the wall time
where other jobs share the cores), and typed/raw of each.  On CUDA every
call ends with ``torch.cuda.synchronize()``.  The raw calls are the
equivalents of the typed ones, out of place but for ``all_reduce_``'s (whose
input is zeros, so that the repeated in-place sums stay finite).  ``--control``
adds a row timing the raw in-place all-reduce against itself: its ratios are
how far two identical sides drift apart on this machine.  ``--layers`` (real
ranks only) adds three rows per collective, each against the same raw call:
the public call with its ``src`` and ``dst`` made beforehand (the public
row makes ``S(0)`` in every call, as code that writes it in the call
does), the collective's call site made beforehand and called (what is left
below the public function and the site lookup), and the group call the
site ends in (``spmd_stubs._comm.group_*``), so that the table shows what
each layer costs.  Each rank first
fixes glibc's malloc thresholds (``scripts/steady_malloc.py``;
``--default-malloc`` leaves them moving), so that output buffers are reused
rather than mapped afresh.  With ``--validate`` the typed
calls run in validation mode (each first checks that the ranks agree):
typed/raw is then that mode's cost.

``uneven all_to_all`` is a mixture of experts' token dispatch: each rank's
``x`` goes out in parts of uneven lengths, in proportion 1 : 2 : ... :
world size, turned by the rank (so every rank also receives uneven parts,
from each rank its own length), the counts made once per size as a
dispatcher's counts exchange would give them.  Its raw call is Megatron's
``_AllToAll`` forward; in the simulated world, whose c10d emulation takes
no per-rank lengths, the functional collective.  Its ``--layers`` rows are
its site and its group call (its ``src`` and ``dst``, ``V``, are made once
either way).

=====================================  ===========================================
typed                                  raw
=====================================  ===========================================
all_reduce(x, ax, src=P, dst=R)        y = x.clone(); dist.all_reduce(y)
all_reduce_(x, ax, src=P, dst=R)       dist.all_reduce(x)
all_gather(x, ax, src=S(0), dst=R)     dist.all_gather_single(out, x)
reduce_scatter(x, ax, src=P, dst=S(0)) dist.reduce_scatter_single(out, x)
all_to_all(x, ax, src=S(0), dst=S(0))  dist.all_to_all_single(out, x)
all_to_all(x, ax, src=V, dst=V,        dist.all_to_all_single(out, x, received,
input_split_sizes=sent,                sent)
output_split_sizes=received)
=====================================  ===========================================
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time
from datetime import timedelta
from typing import Any, Callable, Optional

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.multiprocessing as mp
from steady_malloc import add_option, steady_malloc
from torch.distributed._local_tensor import LocalTensorMode

import spmd_stubs as spmd
from spmd_stubs import P, R, S, V, _comm
from spmd_stubs._dispatch import _Site, call_site
from spmd_stubs.types import MeshAxis, to_axis_type

WORLD = 4
"""The ranks of the world, set by :func:`main` (the raw calls size their outputs by it)."""
SIZES = [1 << n for n in range(10, 25, 2)]
"""1 KiB, 4 KiB, ... 16 MiB per rank."""


class world(MeshAxis):  # noqa: N801 -- an axis bound to the whole world
    """All the ranks."""


Pair = tuple[Callable[[torch.Tensor], object], Callable[[torch.Tensor], object]]


def _raw_all_reduce(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    dist.all_reduce(y)
    return y


def _raw_all_reduce_in_place(x: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(x)
    return x


def _raw_all_gather(x: torch.Tensor) -> torch.Tensor:
    out = x.new_empty((x.numel() * WORLD,))
    dist.all_gather_single(out, x)
    return out


def _raw_reduce_scatter(x: torch.Tensor) -> torch.Tensor:
    out = x.new_empty((x.numel() // WORLD,))
    dist.reduce_scatter_single(out, x)
    return out


def _raw_all_to_all(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x)
    return out


PAIRS: dict[str, Pair] = {
    "all_reduce": (lambda x: spmd.all_reduce(x, world, src=P, dst=R), _raw_all_reduce),
    "all_reduce_": (lambda x: spmd.all_reduce_(x, world, src=P, dst=R), _raw_all_reduce_in_place),
    "all_gather": (lambda x: spmd.all_gather(x, world, src=S(0), dst=R), _raw_all_gather),
    "reduce_scatter": (lambda x: spmd.reduce_scatter(x, world, src=P, dst=S(0)), _raw_reduce_scatter),
    "all_to_all": (lambda x: spmd.all_to_all(x, world, src=S(0), dst=S(0)), _raw_all_to_all),
}


UNEVEN = "uneven all_to_all"


def uneven_counts(n: int) -> list[list[int]]:
    """Row ``r``: the lengths rank ``r`` sends each rank, of its ``n`` floats (the module docstring's proportions)."""
    total = WORLD * (WORLD + 1) // 2
    counts = [[n * ((r + k) % WORLD + 1) // total for k in range(WORLD)] for r in range(WORLD)]
    for row in counts:
        row[-1] += n - sum(row)
    return counts


def _uneven_pair(sent: list[Any], received: list[Any], simulated: bool) -> Pair:
    """The uneven exchange of this rank's counts (``SymInt``s of every rank's in the simulated world), typed and raw."""
    typed = lambda x: spmd.all_to_all(x, world, src=V, dst=V, input_split_sizes=sent, output_split_sizes=received)  # noqa: E731

    def raw(x: torch.Tensor) -> torch.Tensor:
        if simulated:
            return funcol.all_to_all_single(x, received, sent, dist.group.WORLD).wait()  # type: ignore[arg-type]
        out = x.new_empty(sum(received))
        dist.all_to_all_single(out, x, received, sent)
        return out

    return typed, raw


def _uneven_layers(sent: list[int], received: list[int]) -> dict[str, Pair]:
    """``--layers`` of the uneven exchange: its site, made beforehand, given the counts; its group call."""
    group = dist.group.WORLD
    assert group is not None
    site = call_site("all_to_all", world, to_axis_type(V), to_axis_type(V), rows=True)
    assert isinstance(site, _Site)
    raw = _uneven_pair(sent, received, simulated=False)[1]
    return {
        f"{UNEVEN}: its site, made beforehand": (lambda x: site.exchange(x, sent, received), raw),
        f"{UNEVEN}: its group call": (lambda x: _comm.group_exchange_rows(group, received, sent, x), raw),
    }


CONTROL: dict[str, Pair] = {"control: raw all_reduce_ vs itself": (_raw_all_reduce_in_place, _raw_all_reduce_in_place)}
"""The A/A row ``--control`` adds."""
IN_PLACE = {"all_reduce_", "control"}
"""Rows whose calls write over their input, named by what comes before any colon
(``all_reduce_: its group call``, ``control: raw all_reduce_ vs itself``)."""


TYPES: dict[str, tuple[str, Any, Any]] = {
    "all_reduce": ("all_reduce", P, R),
    "all_reduce_": ("all_reduce", P, R),
    "all_gather": ("all_gather", S(0), R),
    "reduce_scatter": ("reduce_scatter", P, S(0)),
    "all_to_all": ("all_to_all", S(0), S(0)),
}
"""Each row of :data:`PAIRS`: its operation, ``src`` and ``dst``."""


def _public_call(name: str, src: Any, dst: Any) -> Callable[[torch.Tensor], object]:
    """The public collective ``name`` on the world, with ``src`` and ``dst`` as given (made once)."""
    public = getattr(spmd, name)
    return lambda x: public(x, world, src=src, dst=dst)


def _layers() -> dict[str, Pair]:
    """``--layers``: each collective's public call with its ``src`` and ``dst`` made beforehand (``S(0)``
    written in the call is made on every call), its call site, made beforehand, and its group call, each
    against its raw call."""
    group = dist.group.WORLD
    assert group is not None
    group_calls: dict[str, Callable[[torch.Tensor], object]] = {
        "all_reduce": lambda x: _comm.group_all_reduce(group, "sum", x),
        "all_reduce_": lambda x: _comm.group_all_reduce_(group, "sum", x),
        "all_gather": lambda x: _comm.group_all_gather(group, WORLD, x),
        "reduce_scatter": lambda x: _comm.group_reduce_scatter(group, "sum", WORLD, x),
        "all_to_all": lambda x: _comm.group_all_to_all(group, x),
    }
    layers: dict[str, Pair] = {}
    for name, (op, src, dst) in TYPES.items():
        site = call_site(op, world, to_axis_type(src), to_axis_type(dst), in_place=name == "all_reduce_")
        layers[f"{name}: its src and dst made beforehand"] = (_public_call(name, src, dst), PAIRS[name][1])
        layers[f"{name}: its site, made beforehand"] = (site, PAIRS[name][1])
        layers[f"{name}: its group call"] = (group_calls[name], PAIRS[name][1])
    return layers


Times = tuple[float, float]
"""Seconds per call: wall, main-thread CPU."""


def _time_pair(pair: Pair, x: torch.Tensor, iters: int, flip: int) -> tuple[Times, Times]:
    """Seconds per call of each side of ``pair`` over ``iters`` calls each, the calls alternating one by one.

    Each side comes first in every other pair of calls (the first where
    ``flip`` is even).
    """
    wall, cpu = [0.0, 0.0], [0.0, 0.0]
    dist.barrier()
    for i in range(iters):
        for side in (0, 1) if (i + flip) % 2 == 0 else (1, 0):
            start, start_cpu = time.perf_counter(), time.thread_time()
            pair[side](x)
            if x.is_cuda:
                torch.cuda.synchronize()
            cpu[side] += time.thread_time() - start_cpu
            wall[side] += time.perf_counter() - start
    return (wall[0] / iters, cpu[0] / iters), (wall[1] / iters, cpu[1] / iters)


Table = list[tuple[str, int, dict[str, list[Times]]]]


def _bench(
    make: Callable[[int], torch.Tensor], uneven: Callable[[int], dict[str, Pair]], size: int, args: argparse.Namespace
) -> Table:
    """Per collective: typed and raw, each round's times on this rank; ``make(n)`` gives an input of n floats,
    ``uneven(n)`` the uneven exchange's rows for it."""
    rows = []
    x = make(size // 4)
    iters = max(args.calls, (1 << 18) // size)
    pairs = {**PAIRS, **uneven(size // 4), **(_layers() if args.layers else {}), **(CONTROL if args.control else {})}
    for name, pair in pairs.items():
        given = torch.zeros_like(x) if name.split(":")[0] in IN_PLACE else x
        pair[0](given), pair[1](given)  # warm-up
        times: dict[str, list[Times]] = {"typed": [], "raw": []}
        for round_ in range(args.rounds):
            typed, raw = _time_pair(pair, given, iters, round_)
            times["typed"].append(typed)
            times["raw"].append(raw)
        rows.append((name, size, times))
    return rows


def _human(size: int) -> str:
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def _row(name: str, size: int, per_rank: list[dict[str, list[Times]]]) -> str:
    """One table row: median wall (slowest rank) and CPU (mean rank) per call, typed/raw of each."""
    wall, cpu = {}, {}
    for variant in ("typed", "raw"):
        rounds = list(zip(*(rank[variant] for rank in per_rank)))
        wall[variant] = statistics.median(max(w for w, _ in ranks) for ranks in rounds)
        cpu[variant] = statistics.median(statistics.fmean(c for _, c in ranks) for ranks in rounds)
    return (
        f"| {name} | {_human(size)} | {wall['typed'] * 1e3:.3f} | {wall['raw'] * 1e3:.3f} | "
        f"{wall['typed'] / wall['raw']:.3f} | {cpu['typed'] * 1e3:.3f} | {cpu['raw'] * 1e3:.3f} | "
        f"{cpu['typed'] / cpu['raw']:.3f} |"
    )


def _header(setting: str, rounds: int) -> None:
    print(f"{setting}; load average {os.getloadavg()[0]:.2f}; {rounds} rounds, medians")
    print("| op | size per rank | typed ms | raw ms | typed/raw | typed CPU ms | raw CPU ms | CPU typed/raw |")
    print("|---|---|---|---|---|---|---|---|", flush=True)


def _footer() -> None:
    print(f"load average {os.getloadavg()[0]:.2f} after", flush=True)


def _worker(rank: int, port: int, args: argparse.Namespace, sizes: list[int]) -> None:
    """One real rank: every size and collective, the table printed by rank 0."""
    global WORLD
    WORLD = args.world
    torch.set_num_threads(1)
    malloc = steady_malloc(not args.default_malloc)
    spmd.set_validation(args.validate)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    device = torch.device(args.device, rank % torch.cuda.device_count()) if args.device == "cuda" else None
    if device is not None:
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend, rank=rank, world_size=WORLD, timeout=timedelta(seconds=120), device_id=device)
    spmd.bind_groups({world: dist.group.WORLD})
    if rank == 0:
        _header(f"{WORLD} {args.backend} ranks, {args.device} tensors, {malloc}", args.rounds)

    def uneven(n: int) -> dict[str, Pair]:
        counts = uneven_counts(n)
        sent, received = counts[rank], [row[rank] for row in counts]
        layers = _uneven_layers(sent, received) if args.layers else {}
        return {UNEVEN: _uneven_pair(sent, received, simulated=False), **layers}

    for size in sizes:
        for name, size, times in _bench(lambda n: torch.randn(n, device=device), uneven, size, args):
            gathered: list[Any] = [None] * WORLD
            dist.all_gather_object(gathered, times)
            if rank == 0:
                print(_row(name, size, gathered), flush=True)
    if rank == 0:
        _footer()
    # Every rank done before any tears down (gloo aborts a rank whose peer left mid-exchange).
    dist.barrier()
    dist.destroy_process_group()


def _simulated(args: argparse.Namespace, sizes: list[int]) -> None:
    """The simulated world: one process, each tensor every rank's part."""
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend

    global WORLD
    WORLD = args.world
    dist.init_process_group("fake", rank=0, world_size=WORLD, store=FakeStore())
    spmd.bind_groups({world: dist.group.WORLD})
    _header(f"simulated world of {WORLD} ranks, {args.device} tensors", args.rounds)
    with LocalTensorMode(WORLD) as mode:

        def make(n: int) -> torch.Tensor:
            return mode.rank_map(lambda r: torch.randn(n, device=args.device))

        def uneven(n: int) -> dict[str, Pair]:
            counts = uneven_counts(n)
            sent = mode.rank_map(lambda r: torch.tensor(counts[r])).tolist()
            received = mode.rank_map(lambda r: torch.tensor([row[r] for row in counts])).tolist()
            return {UNEVEN: _uneven_pair(sent, received, simulated=True)}

        for size in sizes:
            for name, size, times in _bench(make, uneven, size, args):
                print(_row(name, size, [times]), flush=True)
    _footer()
    dist.destroy_process_group()


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--calls", type=int, default=16, help="calls per timed batch, at least (small sizes make more)")
    parser.add_argument("--min-size", type=int, default=1 << 10, help="smallest per-rank size, bytes")
    parser.add_argument("--max-size", type=int, default=1 << 24, help="largest per-rank size, bytes")
    parser.add_argument("--validate", action="store_true", help="typed calls in validation mode")
    parser.add_argument("--control", action="store_true", help="add a row timing the raw all-reduce against itself")
    parser.add_argument("--layers", action="store_true", help="add rows timing each layer of each collective's call")
    parser.add_argument("--world", type=int, default=WORLD, help="ranks")
    parser.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the tensors live")
    parser.add_argument("--simulated", action="store_true", help="one process, LocalTensorMode")
    add_option(parser)
    args = parser.parse_args(argv)
    sizes = [size for size in SIZES if args.min_size <= size <= args.max_size]
    if args.simulated:
        if args.layers:
            parser.error("--layers times the group calls of real ranks; leave out --simulated")
        return _simulated(args, sizes)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(_worker, args=(port, args, sizes), nprocs=args.world, start_method="spawn")


if __name__ == "__main__":
    main()
