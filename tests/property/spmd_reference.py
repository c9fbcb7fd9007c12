"""The global meaning of a program, differentiated by plain autograd.

Independent of the runtime shim and of the type rules: every rank's value is
an ordinary tensor in one process (a *grid*, coordinate ``(dp, tp)`` ->
tensor), ordinary ops run per rank, and each collective/cast is its seed-000
list specification written with differentiable sums, stacks, concatenations
and slices over the members of each group. No custom backward anywhere: the
gradients are whatever autograd makes of these forward definitions.

An input is a set of *leaves*, the values its type says it has: one tensor
per coordinate on an axis where it is V or S(i) (a list of values), a single
tensor shared by every coordinate where it is R or I (one value, used on
every rank) or P (one value, its meaning; each rank holds an arbitrary part
of it, see :func:`local_value`). The global loss is the sum over the P axes of the per-rank losses, at
coordinate 0 of the I axes (:func:`global_loss`). An untyped selector input holds integer indices, the
same on every rank except on the axes its ``varies`` names; it takes no gradient. So do a typed index
input, whose values differ between ranks exactly on its V axes, and the row counts of an uneven
``all_to_all`` (each group's counts a random matrix whose rows and columns all sum to the rows held).

A value moved to the flattened axis ``ep`` by ``reinterpret_mesh`` keeps every rank's tensor (an
alias); ep's one group is the 4 ranks in flattened order, the rank at ``(dp_index, tp_index)``
its member ``dp_index * 2 + tp_index`` (:func:`groups`). A loss on ep counts as one of that type on
every axis it flattens.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable, Iterable

import torch
import torch.nn.functional as F
from spmd_programs import (
    AXES,
    AXIS_SIZE,
    EP,
    Call,
    Comm,
    Index,
    Local,
    Move,
    Program,
    RowCounts,
    Selector,
    Types,
    Value,
)

from spmd_stubs.core import AxisType, Invariant, Kind, Partial

Coord = tuple[int, ...]
"""A rank's coordinate on the mesh, one index per axis of ``AXES`` (dp outer)."""
Grid = dict[Coord, torch.Tensor]
Leaves = dict[str, Grid]
"""Input name -> its leaves, keyed by leaf coordinate (0 on shared axes)."""


@dataclass(frozen=True)
class Inputs:
    """A program's inputs: the leaves (what gradients are taken of), the P offsets, every rank's
    indices of each untyped selector, and every rank's integers of each typed index or row counts input."""

    leaves: Leaves
    offsets: dict[str, dict[tuple[Coord, Coord], torch.Tensor]]
    selectors: dict[str, Grid] = field(default_factory=dict)
    integers: dict[str, Grid] = field(default_factory=dict)

COORDS: list[Coord] = list(itertools.product(range(AXIS_SIZE), repeat=len(AXES)))


def rank_of(coord: Coord) -> int:
    """Row-major mesh: the global rank of a coordinate (dp outer, tp inner)."""
    rank = 0
    for index in coord:
        rank = rank * AXIS_SIZE + index
    return rank


def leaf_of(types: Types, coord: Coord) -> Coord:
    """The leaf behind a rank's value: its own on V axes, the shared one (0) elsewhere."""
    return tuple(i if t.kind is Kind.V else 0 for t, i in zip(types, coord))


def leaf_coords(types: Types) -> list[Coord]:
    return sorted({leaf_of(types, c) for c in COORDS})


def _partial_axes(types: Types) -> list[int]:
    return [a for a, t in enumerate(types) if t.kind is Kind.P]


def _part_key(types: Types, coord: Coord) -> tuple[Coord, Coord]:
    """Ranks with the same key hold the same part: the leaf and the coordinates on P axes."""
    return leaf_of(types, coord), tuple(coord[a] for a in _partial_axes(types))


def random_inputs(program: Program, generator: torch.Generator) -> Inputs:
    """Random leaves (float64) and, for P inputs, random zero-sum offsets of the parts."""
    leaves: Leaves = {}
    offsets: Leaves = {}
    for v in program.inputs:
        leaves[v.name] = {c: _randn(v.shape, generator) for c in leaf_coords(v.types)}
        keys = sorted({_part_key(v.types, c) for c in COORDS})
        raw = {k: _randn(v.shape, generator) for k in keys}
        offsets[v.name] = {}
        for leaf in leaf_coords(v.types):
            mine = [k for k in keys if k[0] == leaf]
            mean = _sum([raw[k] for k in mine]) / len(mine)
            offsets[v.name].update({k: raw[k] - mean for k in mine})
    integers = {i.name: _typed_indices(i, generator) for i in program.indices}
    integers.update({c.name: _row_counts(c, generator) for c in program.counts})
    return Inputs(leaves, offsets, {s.name: _random_indices(s, generator) for s in program.selectors}, integers)


def _random_indices(selector: Selector, generator: torch.Generator) -> Grid:
    """Every rank's indices: one draw per coordinate on the axes where the selector varies, shared elsewhere."""
    own = {c: tuple(i if varies else 0 for i, varies in zip(c, selector.varies)) for c in COORDS}
    drawn = {k: torch.randint(0, selector.bound, selector.shape, generator=generator) for k in sorted(set(own.values()))}
    return {c: drawn[own[c]] for c in COORDS}


def _typed_indices(index: Index, generator: torch.Generator) -> Grid:
    """Every rank's indices: one draw per coordinate on the V axes, shared on the R and I axes (as typed)."""
    varies = tuple(t.kind is Kind.V for t in index.types)
    return _random_indices(Selector(index.name, index.shape, index.bound, varies), generator)


def _row_counts(counts: RowCounts, generator: torch.Generator) -> Grid:
    """Every rank's row counts: in each group of the axis, member i sends member k ``matrix[i][k]`` rows,
    the matrix a sum of ``rows`` random permutations (every row and column sums to ``rows``); groups
    that differ only on axes where the counts are R share one matrix."""
    a = AXES.index(counts.axis)
    matrices: dict[Coord, torch.Tensor] = {}
    out: Grid = {}
    for members in groups(counts.axis):
        key = leaf_of(counts.types, members[0])
        if key not in matrices:
            matrix = torch.zeros(AXIS_SIZE, AXIS_SIZE, dtype=torch.int64)
            for _ in range(counts.rows):
                matrix[torch.arange(AXIS_SIZE), torch.randperm(AXIS_SIZE, generator=generator)] += 1
            matrices[key] = matrix
        out.update({c: matrices[key][c[a]].clone() for c in members})
    return out


def _randn(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    return 0.5 * torch.randn(shape, generator=generator, dtype=torch.float64)


def local_value(value: Value, leaves: Grid, offsets: dict[tuple[Coord, Coord], torch.Tensor], coord: Coord) -> torch.Tensor:
    """A rank's local input: its leaf, or for P an arbitrary part of it.

    A P input's leaf is its meaning X; the rank's part is X / (number of
    parts) plus a constant offset, the offsets summing to zero. A program
    whose result depends on more than the sum of the parts (P * P, f(P))
    depends on the offsets, and its gradients then differ from dX.
    """
    leaf = leaves[leaf_of(value.types, coord)]
    partial = _partial_axes(value.types)
    if not partial:
        return leaf
    return leaf / AXIS_SIZE ** len(partial) + offsets[_part_key(value.types, coord)]


def rank_parts(value: Value, inputs: Inputs) -> dict[int, torch.Tensor]:
    """Every rank's local input, for the runtime world."""
    leaves, offsets = inputs.leaves[value.name], inputs.offsets[value.name]
    return {rank_of(c): local_value(value, leaves, offsets, c).detach().clone() for c in COORDS}


def selector_parts(name: str, inputs: Inputs) -> dict[int, torch.Tensor]:
    """Every rank's indices of the untyped selector or typed integer input ``name``, for the runtime world."""
    grid = inputs.selectors[name] if name in inputs.selectors else inputs.integers[name]
    return {rank_of(c): indices.clone() for c, indices in grid.items()}


# --------------------------------------------------------------------------
# Collectives and casts as list specifications (one group at a time)
# --------------------------------------------------------------------------


def _split(whole: torch.Tensor, layout: AxisType, parts: int) -> list[torch.Tensor]:
    """V: unbind dim 0 (of size ``parts``); S(i): ``parts`` equal chunks of dim i."""
    if layout.shard is None:
        return list(whole.unbind(0))
    return list(whole.chunk(parts, layout.shard))


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
    return [_split(x, dst, len(xs))[k] for k, x in enumerate(xs)]


def _zero_pad(xs: list[torch.Tensor], src: AxisType) -> list[torch.Tensor]:
    """V|S(i) -> P: member k places its part at position k of a zero whole."""
    return [_join([x if j == k else torch.zeros_like(x) for j in range(len(xs))], src) for k, x in enumerate(xs)]


def _all_to_all(xs: list[torch.Tensor], src: AxisType, dst: AxisType) -> list[torch.Tensor]:
    """Member k gets part k (split by dst) of every member's value, joined by src."""
    return [_join([_split(x, dst, len(xs))[k] for x in xs], src) for k in range(len(xs))]


def _exchange_rows(xs: list[torch.Tensor], sent: list[list[int]]) -> list[torch.Tensor]:
    """The uneven all_to_all: member j's dim 0 cut into parts of ``sent[j]`` rows, member k gets part k of
    every member's, concatenated in member order."""
    parts = [x.split(counts) for x, counts in zip(xs, sent)]
    return [torch.cat([p[k] for p in parts]) for k in range(len(xs))]


def list_spec(op: str, src: AxisType, dst: AxisType, xs: list[torch.Tensor],
              sent: list[list[int]] | None = None) -> list[torch.Tensor]:
    """Every group member's output from every member's input (group order); ``sent``: every member's
    row counts of an uneven all_to_all."""
    s, d = src.kind, dst.kind
    if sent is not None:
        assert op == "all_to_all"
        return _exchange_rows(xs, sent)
    if op == "redistribute":
        return _redistribute(src, dst, xs)
    if op in ("reinterpret", "convert") and src == dst:
        return list(xs)  # a cast to the type it has
    if op == "all_reduce":
        return [_sum(xs)] * len(xs)
    if op == "all_gather":
        return [_join(xs, src)] * len(xs)
    if op == "reduce_scatter":
        return _split(_sum(xs), dst, len(xs))
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
        return [_sum(xs)] * len(xs) if d in (Kind.R, Kind.I) else _split(_sum(xs), dst, len(xs))
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


def ep_index(coord: Coord) -> int:
    """A rank's member index on ep, the flattening of ``AXES`` (dp outermost): ``dp_index * 2 + tp_index``."""
    return coord[0] * AXIS_SIZE + coord[1]


def groups(axis: str) -> list[list[Coord]]:
    """The groups of ``axis``: coordinates equal on every other axis, in index order; ep's one group is
    every rank, in its member order."""
    if axis == EP:
        return [sorted(COORDS, key=ep_index)]
    a = AXES.index(axis)
    out: dict[Coord, list[Coord]] = {}
    for c in COORDS:
        out.setdefault(c[:a] + c[a + 1 :], []).append(c)
    return list(out.values())


def _apply_comm(statement: Comm, grid: Grid, counts: Grid | None = None) -> Grid:
    """The statement on every group of its axis; ``counts``: every rank's row counts of an uneven all_to_all."""
    out: Grid = {}
    for members in groups(statement.axis):
        sent = None if counts is None else [counts[c].tolist() for c in members]
        ys = list_spec(statement.op, statement.src, statement.dst, [grid[c] for c in members], sent)
        out.update(zip(members, ys))
    return out


def _apply_call(statement: Call, grid: Grid) -> Grid:
    """A helper's call: ``reinterpret(V,P)`` where it declares P (each rank's value as it is), then the
    all-reduce of its body over the axis it reduces at run time; a size-1 bypass never runs on this mesh."""
    axis = statement.reduced_axis
    if axis is None:
        return dict(grid)
    return _apply_comm(Comm(statement.target, "all_reduce", statement.arg, axis, Partial, Invariant, False), grid)


def _apply_local(statement: Local, env: dict[str, Grid]) -> Grid:
    """The same source expression the program runs, evaluated on each rank's tensors."""
    namespace: dict[str, object] = {"torch": torch, "F": F}
    out: Grid = {}
    for c in COORDS:
        namespace.update({name: env[name][c] for name in statement.args})
        out[c] = eval(statement.expression, namespace)
    return out


# --------------------------------------------------------------------------
# The program's meaning and its gradient
# --------------------------------------------------------------------------


def run(program: Program, leaves: Leaves, inputs: Inputs) -> Grid:
    """Every rank's loss, computed from ``leaves`` (and the constant offsets of ``inputs``)."""
    env: dict[str, Grid] = {
        v.name: {c: local_value(v, leaves[v.name], inputs.offsets[v.name], c) for c in COORDS} for v in program.inputs
    }
    env.update(inputs.selectors)
    env.update(inputs.integers)
    for statement in program.body:
        if isinstance(statement, Comm):
            counts = None if statement.counts is None else env[statement.counts]
            env[statement.target.name] = _apply_comm(statement, env[statement.arg], counts)
        elif isinstance(statement, Call):
            env[statement.target.name] = _apply_call(statement, env[statement.arg])
        elif isinstance(statement, Move):
            env[statement.target.name] = dict(env[statement.arg])  # an alias: every rank keeps its tensor
        else:
            env[statement.target.name] = _apply_local(statement, env)
    return env[program.loss.name]


def counted(types: Types) -> Callable[[Coord], bool]:
    """Whether a rank's loss counts: every coordinate on P (and V) axes, coordinate 0 on I (and R).

    An I or R loss is one value held by every rank, a P loss is the sum of
    the ranks' parts. (A V loss has no agreed meaning; it counts like P, which
    is what seeding 1.0 on every rank differentiates.)
    """
    return lambda c: all(t.kind in (Kind.V, Kind.P) or i == 0 for t, i in zip(types, c))


def on_axes(value: Value) -> Types:
    """``value``'s types on ``AXES``: as they are, or a loss on ep's type on each axis it flattens (a
    type uniform over a group is that type on the flattened axis, docs/spec.md#meshes-over-the-same-ranks)."""
    if value.mesh == AXES:
        return value.types
    (flattened,) = value.types
    return (flattened,) * len(AXES)


def global_loss(losses: Grid, types: Types) -> torch.Tensor:
    keep = counted(types)
    return _sum([loss for c, loss in losses.items() if keep(c)])


def reference_gradients(program: Program, inputs: Inputs) -> Leaves:
    """d(global loss)/d(leaf) for every leaf, by plain autograd (zeros for unused leaves)."""
    live = {name: {c: t.detach().clone().requires_grad_() for c, t in grid.items()} for name, grid in inputs.leaves.items()}
    flat = [t for grid in live.values() for t in grid.values()]
    loss = global_loss(run(program, live, inputs), on_axes(program.loss))
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
    * V, S(i): every rank holds its own leaf; its gradient is that rank's.
    * P: one leaf, the meaning X, of which every rank holds a part; moving any
      one part moves X one for one, so every rank's gradient (an R value) must
      be the whole dL/dX.
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
