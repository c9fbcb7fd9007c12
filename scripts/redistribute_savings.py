"""How many collectives the partition-spec planner saves over the naive per-axis route.

For every example of :data:`spmd_stubs.planner.EXAMPLES` prints, as markdown
table rows: the collectives (and all steps) of ``planner.naive_plan``, those
of ``planner.plan``, the collectives saved, and the elements each rank
receives (as a fraction of the global tensor, ring algorithms) under both.
Every axis has 2 ranks unless ``--size AXIS=N`` says otherwise.

The first table lets the planner flatten axes in any order (axes bound to
explicit process groups); the second keeps flattened groups in the mesh
order ``--mesh-order`` (axes bound with ``bind_mesh``: ``DeviceMesh`` flattens
only in its own order) and lists only the rows where that changes the plan.

Usage: python scripts/redistribute_savings.py [--size dp=4 ...] [--mesh-order dp,cp,tp]
"""

from __future__ import annotations

import argparse
from fractions import Fraction
from typing import Optional, Sequence

from spmd_stubs.core import TensorType, planner

HEADER = (
    "| src | dst | naive: collectives (steps) | planned: collectives (steps) | saved | "
    "received per rank, naive -> planned | planned steps |\n"
    "|---|---|---|---|---|---|---|"
)


def _fraction(value: Fraction) -> str:
    return str(value) if value.denominator != 1 else str(value.numerator)


def row(src_text: str, dst_text: str, sizes: dict[str, int], mesh_order: Optional[Sequence[str]]) -> tuple[str, int, int]:
    src, dst = TensorType.parse(src_text), TensorType.parse(dst_text)
    naive = planner.naive_plan(src, dst, mesh_order=mesh_order)
    plan = planner.plan(src, dst, sizes=sizes, mesh_order=mesh_order)
    n_naive, n_plan = planner.collective_count(naive), planner.collective_count(plan)
    received = f"{_fraction(planner.received(naive, sizes))} -> {_fraction(planner.received(plan, sizes))}"
    steps = "; ".join(f"`{step}`" for step in plan) or "(none)"
    text = (
        f"| `{src}` | `{dst}` | {n_naive} ({len(naive)}) | {n_plan} ({len(plan)}) | {n_naive - n_plan} | "
        f"{received} | {steps} |"
    )
    return text, n_naive, n_plan


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", action="append", default=[], metavar="AXIS=N", help="an axis's size (default 2)")
    parser.add_argument("--mesh-order", default="dp,cp,tp", help="the mesh's dim order for the second table")
    args = parser.parse_args(argv)
    sizes = {axis: int(n) for axis, _, n in (item.partition("=") for item in args.size)}
    mesh_order = tuple(args.mesh_order.split(","))
    shown_sizes = ", ".join(f"{axis}={sizes.get(axis, planner.DEFAULT_AXIS_SIZE)}" for axis in mesh_order)

    print(f"Flattened in any order; axis sizes {shown_sizes}.\n")
    print(HEADER)
    total_naive = total_plan = 0
    for src, dst in planner.EXAMPLES:
        text, n_naive, n_plan = row(src, dst, sizes, None)
        total_naive, total_plan = total_naive + n_naive, total_plan + n_plan
        print(text)
    print(
        f"\n{len(planner.EXAMPLES)} cases: {total_naive} collectives naive, {total_plan} planned, "
        f"{total_naive - total_plan} saved."
    )

    print(f"\nFlattened in mesh order ({', '.join(mesh_order)}): the rows that change.\n")
    print(HEADER)
    total_naive = total_plan = 0
    for src, dst in planner.EXAMPLES:
        s, d = TensorType.parse(src), TensorType.parse(dst)
        text, n_naive, n_plan = row(src, dst, sizes, mesh_order)
        total_naive, total_plan = total_naive + n_naive, total_plan + n_plan
        if planner.plan(s, d, sizes=sizes, mesh_order=mesh_order) != planner.plan(s, d, sizes=sizes):
            print(text)
    print(
        f"\nIn mesh order, {len(planner.EXAMPLES)} cases: {total_naive} collectives naive, {total_plan} planned, "
        f"{total_naive - total_plan} saved."
    )


if __name__ == "__main__":
    main()
