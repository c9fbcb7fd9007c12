"""The global meaning of a program, differentiated by plain autograd.

Independent of the runtime shim and of the type rules: every rank's value is
an ordinary tensor in one process (a *grid*, coordinate ``(dp, tp)`` ->
tensor), ordinary ops run per rank, and each collective/cast is its seed-000
list specification written with differentiable sums, stacks, concatenations
and slices over the members of each group. No custom backward anywhere: the
gradients are whatever autograd makes of these forward definitions.

An input is a set of *leaves*: one tensor per coordinate on an axis where its
type is V, S(i) or P (the ranks hold different data), a single tensor shared
by every coordinate on an axis where it is R or I (one value, used on every
rank). The global loss is the sum over the P axes of the per-rank losses, at
coordinate 0 of the I axes (:func:`global_loss`).
"""

from __future__ import annotations

import itertools
from typing import Callable, Iterable

import torch
import torch.nn.functional as F

from spmd_programs import AXES, AXIS_SIZE, Comm, Local, Program, Types, Value
from spmd_stubs.algebra import AxisType, Kind

Coord = tuple[int, ...]
"""A rank's coordinate on the mesh, one index per axis of ``AXES`` (dp outer)."""
Grid = dict[Coord, torch.Tensor]
Leaves = dict[str, Grid]
"""Input name -> its leaves, keyed by leaf coordinate (0 on shared axes)."""

COORDS: list[Coord] = list(itertools.product(range(AXIS_SIZE), repeat=len(AXES)))


def rank_of(coord: Coord) -> int:
    """Row-major mesh: the global rank of a coordinate (dp outer, tp inner)."""
    rank = 0
    for index in coord:
        rank = rank * AXIS_SIZE + index
    return rank


def _distinct(kind: Kind) -> bool:
    """Ranks hold different data on an axis of this type (V, S(i), P)."""
    return kind in (Kind.V, Kind.P)


def leaf_of(types: Types, coord: Coord) -> Coord:
    """The leaf a rank's value is: its own on distinct axes, the shared one (0) on R/I axes."""
    return tuple(i if _distinct(t.kind) else 0 for t, i in zip(types, coord))


def leaf_coords(types: Types) -> list[Coord]:
    return sorted({leaf_of(types, c) for c in COORDS})


def random_leaves(program: Program, generator: torch.Generator) -> Leaves:
    """Independent random values for every leaf of every input (float64)."""
    return {
        v.name: {c: 0.5 * torch.randn(v.shape, generator=generator, dtype=torch.float64) for c in leaf_coords(v.types)}
        for v in program.inputs
    }


def rank_parts(value: Value, leaves: Grid) -> dict[int, torch.Tensor]:
    """Every rank's local input (the leaf it is), for the runtime world."""
    return {rank_of(c): leaves[leaf_of(value.types, c)].detach().clone() for c in COORDS}


# --------------------------------------------------------------------------
# Collectives and casts as list specifications (one group at a time)
# --------------------------------------------------------------------------


def _split(whole: torch.Tensor, layout: AxisType) -> list[torch.Tensor]:
    """V: unbind dim 0; S(i): equal chunks of dim i."""
    if layout.shard is None:
        return list(whole.unbind(0))
    return list(whole.chunk(AXIS_SIZE, layout.shard))


def _join(parts: list[torch.Tensor], layout: AxisType) -> torch.Tensor:
    """V: stack on a new dim 0; S(i): concatenate dim i."""
    if layout.shard is None:
        return torch.stack(parts)
    return torch.cat(parts, layout.shard)


def _sum(xs: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack(xs).sum(0)


def _keep_first(xs: list[torch.Tensor]) -> list[torch.Tensor]:
    """R/I -> P keeping the meaning: member 0 holds the value, the rest zeros."""
    return [x if k == 0 else torch.zeros_like(x) for k, x in enumerate(xs)]


def _keep_slice(xs: list[torch.Tensor], dst: AxisType) -> list[torch.Tensor]:
    """R/I -> V|S(i): member k keeps part k of its (identical) whole."""
    return [_split(x, dst)[k] for k, x in enumerate(xs)]


def _zero_pad(xs: list[torch.Tensor], src: AxisType) -> list[torch.Tensor]:
    """V|S(i) -> P: member k places its part at position k of a zero whole."""
    return [_join([x if j == k else torch.zeros_like(x) for j in range(len(xs))], src) for k, x in enumerate(xs)]


def _all_to_all(xs: list[torch.Tensor], src: AxisType, dst: AxisType) -> list[torch.Tensor]:
    """Member k gets part k (split by dst) of every member's value, joined by src."""
    return [_join([_split(x, dst)[k] for x in xs], src) for k in range(len(xs))]


def list_spec(op: str, src: AxisType, dst: AxisType, xs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Every group member's output from every member's input (group order)."""
    s, d = src.kind, dst.kind
    if op == "redistribute":
        return _redistribute(src, dst, xs)
    if op in ("reinterpret", "convert") and src == dst:
        return list(xs)  # a cast to the type it has
    if op == "all_reduce":
        return [_sum(xs)] * len(xs)
    if op == "all_gather":
        return [_join(xs, src)] * len(xs)
    if op == "reduce_scatter":
        return _split(_sum(xs), dst)
    if op == "all_to_all":
        return _all_to_all(xs, src, dst)
    if op == "convert" and d is Kind.V:
        return _keep_slice(xs, dst)
    if op == "convert" and s is Kind.V:
        return _zero_pad(xs, src)
    if op == "convert" and d is Kind.P and s is not Kind.P:
        return _keep_first(xs)
    # reinterpret, and the converts that only retype (I<->R, X->X).
    return list(xs)


def _redistribute(src: AxisType, dst: AxisType, xs: list[torch.Tensor]) -> list[torch.Tensor]:
    """The meaning-preserving change of type (communicating where needed)."""
    s, d = src.kind, dst.kind
    if s is Kind.P and d is not Kind.P:
        return [_sum(xs)] * len(xs) if d in (Kind.R, Kind.I) else _split(_sum(xs), dst)
    if s is Kind.V and d in (Kind.R, Kind.I):
        return [_join(xs, src)] * len(xs)
    if s is Kind.V and d is Kind.V:
        moves = src.shard is not None and dst.shard is not None and src != dst
        return _all_to_all(xs, src, dst) if moves else list(xs)
    if s is Kind.V and d is Kind.P:
        return _zero_pad(xs, src)
    if d is Kind.V:
        return _keep_slice(xs, dst)
    if d is Kind.P and s is not Kind.P:
        return _keep_first(xs)
    return list(xs)


def groups(axis: str) -> list[list[Coord]]:
    """The groups of ``axis``: coordinates equal on every other axis, in index order."""
    a = AXES.index(axis)
    out: dict[Coord, list[Coord]] = {}
    for c in COORDS:
        out.setdefault(c[:a] + c[a + 1 :], []).append(c)
    return list(out.values())


def _apply_comm(statement: Comm, grid: Grid) -> Grid:
    out: Grid = {}
    for members in groups(statement.axis):
        ys = list_spec(statement.op, statement.src, statement.dst, [grid[c] for c in members])
        out.update(zip(members, ys))
    return out


def _apply_local(statement: Local, env: dict[str, Grid]) -> Grid:
    """The same source expression the program runs, evaluated on each rank's tensors."""
    namespace: dict[str, object] = {"torch": torch, "F": F}
    out: Grid = {}
    for c in COORDS:
        namespace.update({name: env[name][c] for name in statement.args})
        out[c] = eval(statement.expression, namespace)  # noqa: S307 -- our own generated expression
    return out


# --------------------------------------------------------------------------
# The program's meaning and its gradient
# --------------------------------------------------------------------------


def run(program: Program, leaves: Leaves) -> Grid:
    """Every rank's loss, computed from the leaves."""
    env: dict[str, Grid] = {
        v.name: {c: leaves[v.name][leaf_of(v.types, c)] for c in COORDS} for v in program.inputs
    }
    for statement in program.body:
        if isinstance(statement, Comm):
            env[statement.target.name] = _apply_comm(statement, env[statement.arg])
        else:
            env[statement.target.name] = _apply_local(statement, env)
    return env[program.loss.name]


def counted(types: Types) -> Callable[[Coord], bool]:
    """Whether a rank's loss counts: every coordinate on P (and V) axes, coordinate 0 on I (and R).

    An I or R loss is one value held by every rank, a P loss is the sum of
    the ranks' parts. (A V loss has no agreed meaning; it counts like P, which
    is what seeding 1.0 on every rank differentiates.)
    """
    return lambda c: all(_distinct(t.kind) or i == 0 for t, i in zip(types, c))


def global_loss(losses: Grid, types: Types) -> torch.Tensor:
    keep = counted(types)
    return _sum([loss for c, loss in losses.items() if keep(c)])


def reference_gradients(program: Program, leaves: Leaves) -> Leaves:
    """d(global loss)/d(leaf) for every leaf, by plain autograd (zeros for unused leaves)."""
    live = {name: {c: t.detach().clone().requires_grad_() for c, t in grid.items()} for name, grid in leaves.items()}
    flat = [t for grid in live.values() for t in grid.values()]
    loss = global_loss(run(program, live), program.loss.types)
    grads = torch.autograd.grad(loss, flat, allow_unused=True)
    it: Iterable[torch.Tensor | None] = iter(grads)
    return {
        name: {c: (g if g is not None else torch.zeros_like(t)) for (c, t), g in zip(grid.items(), it)}
        for name, grid in live.items()
    }


# --------------------------------------------------------------------------
# Comparing the runtime's per-rank gradients with the reference
# --------------------------------------------------------------------------


def expected_pairs(value: Value, per_rank: dict[int, torch.Tensor], reference: Grid) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """(what, runtime side, reference) for every comparison an input's type calls for.

    For each leaf and each choice of coordinates on the input's I axes, the
    runtime gradients summed over its R axes must equal the leaf's reference:

    * R: the ranks' copies are one value used independently per rank; its
      gradient is a pending sum (P) whose meaning is the sum of the ranks' parts.
    * I: one value in one logical computation; its gradient (I) must be the
      whole gradient on every rank.
    * V, S(i), P: every rank holds its own leaf; its gradient is that rank's
      (for P the gradient is R, the same on every rank, but each is still
      compared with its own leaf's reference).
    """
    summed = [i for i, t in enumerate(value.types) if t.kind is Kind.R]
    out = []
    buckets: dict[tuple[Coord, Coord], list[torch.Tensor]] = {}
    for c in COORDS:
        others = tuple(i for a, i in enumerate(c) if a not in summed)
        buckets.setdefault((leaf_of(value.types, c), others), []).append(per_rank[rank_of(c)])
    for (leaf, others), grads in sorted(buckets.items()):
        what = f"{value.name} leaf {leaf} at {dict(zip((a for k, a in enumerate(AXES) if k not in summed), others))}"
        out.append((what, _sum(grads), reference[leaf]))
    return out
