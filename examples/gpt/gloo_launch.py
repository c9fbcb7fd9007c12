"""Run a function on N local CPU ranks (gloo), spawned here or launched by torchrun.

Shared by the GPT example, its tests and the bug gallery's runtime tests.
``fn`` must be importable (a module-level function), and returns picklable
data; :func:`spawn` gives back each rank's result in rank order, or raises
with the failing ranks' tracebacks.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import traceback
from datetime import timedelta
from typing import Any, Callable

import torch
import torch.distributed as dist


def under_torchrun() -> bool:
    """True when torchrun started this process (it sets LOCAL_RANK)."""
    return "LOCAL_RANK" in os.environ


def run_here(fn: Callable[..., Any], *args: Any) -> Any:
    """Join the process group torchrun describes, run ``fn(*args)``, leave it."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    try:
        result = fn(*args)
        dist.barrier()  # leave together: a rank that left early would break the others' connections
        return result
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    """A TCP port free on this machine now, for a local world's rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_main(rank: int, world_size: int, port: int, fn: Callable[..., Any], args: tuple[Any, ...], results: Any) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size))
    try:
        results.put((rank, True, run_here(fn, *args)))
    except BaseException:  # noqa: BLE001 -- sent to the parent, which raises it
        results.put((rank, False, traceback.format_exc()))


def spawn(fn: Callable[..., Any], *args: Any, world_size: int = 4, timeout: float = 240.0) -> list[Any]:
    """Run ``fn(*args)`` on ``world_size`` fresh gloo ranks; their results in rank order."""
    # torch.multiprocessing re-exports this very function; the stdlib's is
    # typed per start method (a SpawnContext has .Process) for every checker.
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, world_size, port, fn, args, results)) for r in range(world_size)]
    for p in procs:
        p.start()
    outcome: dict[int, tuple[bool, Any]] = {}
    try:
        for _ in range(world_size):
            rank, ok, value = results.get(timeout=timeout)
            outcome[rank] = (ok, value)
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
    failed = {r: v for r, (ok, v) in outcome.items() if not ok}
    if failed:
        raise RuntimeError("\n".join(f"rank {r} failed:\n{tb}" for r, tb in sorted(failed.items())))
    return [outcome[r][1] for r in range(world_size)]
