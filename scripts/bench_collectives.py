"""Typed collectives against the raw torch.distributed calls, 4 local gloo ranks.

    .venv/bin/python scripts/bench_collectives.py [--rounds 5] [--validate]

For each per-rank input size (1 KiB .. 16 MiB of float32) and each
collective, typed and raw calls alternate in rounds (a barrier before each
timed batch); the table shows the median time per call and typed/raw.  The
raw calls are the out-of-place equivalents of the typed ones.  With
``--validate`` the typed calls run in validation mode (each first checks
that the ranks agree): typed/raw is then that mode's cost.

=====================================  ===========================================
typed                                  raw
=====================================  ===========================================
all_reduce(x, ax, src=P, dst=R)        y = x.clone(); dist.all_reduce(y)
all_gather(x, ax, src=S(0), dst=R)     dist.all_gather_single(out, x)
reduce_scatter(x, ax, src=P, dst=S(0)) dist.reduce_scatter_single(out, x)
all_to_all(x, ax, src=S(0), dst=S(0))  dist.all_to_all_single(out, x)
=====================================  ===========================================
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time
from datetime import timedelta
from typing import Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import spmd_stubs as spmd
from spmd_stubs import P, R, S
from spmd_stubs.types import MeshAxis

WORLD = 4
SIZES = [1 << 10, 1 << 14, 1 << 18, 1 << 20, 1 << 22, 1 << 24]


class world(MeshAxis):  # noqa: N801 -- an axis bound to the whole world
    """All four ranks."""


Pair = tuple[Callable[[torch.Tensor], object], Callable[[torch.Tensor], object]]


def _raw_all_reduce(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    dist.all_reduce(y)
    return y


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
    "all_gather": (lambda x: spmd.all_gather(x, world, src=S(0), dst=R), _raw_all_gather),
    "reduce_scatter": (lambda x: spmd.reduce_scatter(x, world, src=P, dst=S(0)), _raw_reduce_scatter),
    "all_to_all": (lambda x: spmd.all_to_all(x, world, src=S(0), dst=S(0)), _raw_all_to_all),
}


def _time(fn: Callable[[torch.Tensor], object], x: torch.Tensor, iters: int) -> float:
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        fn(x)
    return (time.perf_counter() - start) / iters


def _bench(size: int, rounds: int) -> list[tuple[str, int, float, float]]:
    rows = []
    x = torch.randn(size // 4)
    iters = max(2, (1 << 18) // size)
    for name, (typed, raw) in PAIRS.items():
        typed(x), raw(x)  # warm-up
        typed_times, raw_times = [], []
        for _ in range(rounds):
            typed_times.append(_time(typed, x, iters))
            raw_times.append(_time(raw, x, iters))
        rows.append((name, size, statistics.median(typed_times), statistics.median(raw_times)))
    return rows


def _human(size: int) -> str:
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def _worker(rank: int, port: int, rounds: int, validate: bool) -> None:
    torch.set_num_threads(1)
    spmd.set_validation(validate)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD, timeout=timedelta(seconds=120))
    spmd.bind_groups({world: dist.group.WORLD})
    if rank == 0:
        print("| op | size per rank | typed (ms) | raw (ms) | typed/raw |")
        print("|---|---|---|---|---|", flush=True)
    for size in SIZES:
        for name, size, typed, raw in _bench(size, rounds):
            if rank == 0:
                print(f"| {name} | {_human(size)} | {typed * 1e3:.3f} | {raw * 1e3:.3f} | {typed / raw:.2f} |", flush=True)
    # Every rank done before any tears down (gloo aborts a rank whose peer left mid-exchange).
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--validate", action="store_true", help="typed calls in validation mode")
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(_worker, args=(port, args.rounds, args.validate), nprocs=WORLD, start_method="spawn")


if __name__ == "__main__":
    main()
