"""Per-call cost of a typed collective or cast against its raw Megatron-style function.

    .venv/bin/python scripts/bench_call_overhead.py [--calls 2000] [--rounds 7]

One process, rank 0 of a 2 (dp) x 2 (tp) world on torch's fake process
group, whose collectives return at once: what is measured is the Python and
autograd work around the communication, which the step benchmark's wall
time hides under waits.  For every call the GPT example makes
(``scripts/bench_step.py``'s ``RAW`` table), one call on a small tensor,
forward and backward (``y.sum().backward()``; forward only, under
``no_grad``, where the model has no gradient to flow), typed and raw
alternating in rounds; the table gives the fastest round of each (the least
disturbed by other jobs) in microseconds per call and their difference, the
typed shim's own cost per call.
"""

from __future__ import annotations

import argparse
import os
import sys
import timeit
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_step import RAW

import spmd_stubs as spmd
from spmd_stubs.axes import dp, tp
from spmd_stubs.types import to_axis_type

SHAPE = (4, 8)  # dim 0 splits over tp; V is stacked on it


FORWARD_ONLY = {("all_reduce_", spmd.P, spmd.R), ("all_reduce", spmd.Pmax, spmd.R), ("reinterpret", spmd.V, spmd.Pmax)}
"""Calls the model makes where no gradient flows: the dp gradient sync (under
``no_grad``) and the cross entropy's row max (of detached logits)."""


def _calls(op: str, src: Any, dst: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The typed and the raw call of one ``RAW`` entry, with its backward where the model has one."""
    axis = dp if (op, src, dst) == ("all_reduce_", spmd.P, spmd.R) else tp
    group = spmd.group_of(axis)
    typed_fn, raw_fn = getattr(spmd, op), RAW[(op, src, dst)]
    if (op, src, dst) in FORWARD_ONLY:
        x = torch.randn(SHAPE)

        def typed() -> Any:
            with torch.no_grad():
                return typed_fn(x, axis, src=src, dst=dst)

        def raw() -> Any:
            with torch.no_grad():
                return raw_fn(x, group)

        return typed, raw
    leaf = torch.randn(SHAPE, requires_grad=True)
    return (
        lambda: typed_fn(leaf * 1.0, axis, src=src, dst=dst).sum().backward(),
        lambda: raw_fn(leaf * 1.0, group).sum().backward(),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per timed round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    dist.init_process_group("fake", rank=0, world_size=4, store=FakeStore())
    spmd.bind_mesh(init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp")))
    print(f"load average {os.getloadavg()[0]:.2f}; {args.rounds} rounds of {args.calls} calls, fastest round")
    print("| call (as the GPT example makes it) | typed us/call | raw us/call | typed - raw us |")
    print("|---|---|---|---|")
    try:
        for op, src, dst in RAW:
            typed, raw = _calls(op, src, dst)
            best = {"typed": float("inf"), "raw": float("inf")}
            for _ in range(args.rounds):
                for name, fn in (("typed", typed), ("raw", raw)):
                    fn()  # warm
                    best[name] = min(best[name], timeit.timeit(fn, number=args.calls) / args.calls * 1e6)
            label = f"{op}({to_axis_type(src)}, {to_axis_type(dst)})"
            print(f"| {label} | {best['typed']:.1f} | {best['raw']:.1f} | {best['typed'] - best['raw']:+.1f} |")
    finally:
        spmd.unbind()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
