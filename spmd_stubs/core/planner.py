"""Planning ``redistribute`` between two partition specs (seed 000, "Partition spec redistribute").

Pure Python (no torch, no mypy): the runtime executes a plan with the typed
collectives, the plugin only needs :func:`validate` and the destination type.

A *partition spec* is a :class:`~spmd_stubs.core.TensorType` in global
form: every axis is R, I, P (any reduction) or a shard ``S(i)``; several axes
may shard one dim, in an order (``S(0)@(dp, tp)``: dim 0 is split over dp,
each dp part over tp).  ``redistribute(x, src, dst)`` keeps the value and
changes the spec.  Its building blocks are the per-axis transitions of
:func:`spmd_stubs.core.route` (``all_gather`` for ``S(i)->R|I``,
``all_reduce`` for ``P->R|I``, ``reduce_scatter`` for ``P->S(i)``,
``all_to_all`` for ``S(i)->S(j)``, ``convert`` for the local rest), run on
one axis or on a flattened tuple of axes (one collective on the product
group, the first axis outermost, see :mod:`spmd_stubs.mesh`).

Diagrams: one row per rank of a 2 dp x 2 tp mesh, written ``(dp, tp)``; a
tensor of four rows ``[A, B, C, D]`` on dim 0::

    rank     S(0)@(dp,tp)   S(0)@(tp,dp)   S(0)@dp, R@tp
    (0, 0)   [A]            [A]            [A, B]
    (0, 1)   [B]            [C]            [A, B]
    (1, 0)   [C]            [B]            [C, D]
    (1, 1)   [D]            [D]            [C, D]

Two facts shape every plan:

* **Only the minor (last) axis of a dim moves on its own.**  Gathering
  ``S(0)@(dp,tp)`` over tp joins ``[A]`` and ``[B]`` into dp's part ``[A, B]``
  (``S(0)@dp, R@tp``); gathering over dp instead would join ``[A]`` with
  ``[C]``, which is no part of any spec.  A new shard (``convert R->S(i)``,
  ``reduce_scatter``, the arriving side of ``all_to_all``) likewise becomes
  the new minor axis.  So ``S(0)@(dp,tp) -> S(0)@(tp,dp)`` must first take
  both axes off dim 0 and put them back in the other order.
* **Same-kind steps on several axes are one collective on the flattened
  axes.**  ``all_reduce`` on dp and on tp is ``all_reduce((dp, tp))``;
  gathering ``S(0)@(dp,tp)`` over tp then dp is ``all_gather((dp, tp))``
  (the flattened group's rank order is dp-major, which is dim 0's order)::

      [A]                                      [A]
      [B]   =>  all_gather((dp, tp), S(0), R)  [B]   => [A, B, C, D]
      [C]                                      [C]
      [D]                                      [D]

  ``reduce_scatter((dp, tp), P, S(0))`` and ``convert((dp, tp), R, S(0))``
  produce ``S(0)@(dp,tp)`` likewise, and ``all_to_all((dp, tp), S(0), S(1))``
  moves both axes from dim 0 to dim 1 keeping their order.

:func:`naive_plan` is the per-axis route: each axis takes its
``route`` step when the minor-axis rule allows, and an axis that is
in the way is gathered to R first (and re-sharded by a ``convert`` later).
:func:`plan` searches the flattened steps for the plan that receives the
fewest elements per rank (ring cost model, below), then uses the fewest
collectives and steps, among plans with no more collectives and no more
steps than :func:`naive_plan`.
"""

from __future__ import annotations

import functools
import heapq
import itertools
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Iterator, Mapping, Optional, Sequence

from spmd_stubs.core import COLLECTIVES, AxisType, Code, Kind, Replicate, Shard, SpmdTypeError, TensorType, route, transition

__all__ = [
    "PlannedStep",
    "plan",
    "naive_plan",
    "validate",
    "spec_of_entries",
    "collective_count",
    "received",
    "DEFAULT_AXIS_SIZE",
    "EXAMPLES",
]

DEFAULT_AXIS_SIZE = 2
"""The size :func:`plan` assumes for an axis whose size it is not told."""

EXAMPLES: tuple[tuple[str, str], ...] = (
    # one kind of step on both axes: one flattened collective (or cast)
    ("P@dp, P@tp", "R@dp, R@tp"),
    ("P@dp, P@tp", "I@dp, I@tp"),
    ("S(0)@(dp,tp)", "R@dp, R@tp"),
    ("S(0)@(dp,tp)", "I@dp, I@tp"),
    ("P@dp, P@tp", "S(0)@(dp,tp)"),
    ("P@dp, P@tp", "S(1)@(tp,dp)"),
    ("S(0)@(dp,tp)", "S(1)@(dp,tp)"),
    ("R@dp, R@tp", "S(0)@(dp,tp)"),
    ("I@dp, I@tp", "S(1)@(tp,dp)"),
    ("R@dp, R@tp", "P@dp, P@tp"),
    ("S(0)@(dp,tp)", "P@dp, P@tp"),
    # the minor-axis rule: reorder or move axes that share a dim
    ("S(0)@(dp,tp)", "S(0)@(tp,dp)"),
    ("S(0)@(dp,tp)", "S(1)@dp, S(0)@tp"),
    ("S(0)@(dp,tp)", "S(0)@dp, S(1)@tp"),
    ("S(0)@(dp,tp)", "S(1)@(tp,dp)"),
    ("S(0)@dp, S(1)@tp", "S(1)@(tp,dp)"),
    ("S(0)@dp, P@tp", "S(0)@(tp,dp)"),
    ("P@dp, S(0)@tp", "S(0)@(tp,dp)"),
    # different kinds per axis: nothing to flatten
    ("P@dp, S(0)@tp", "R@dp, R@tp"),
    ("P@dp, P@tp", "S(0)@dp, R@tp"),
    ("R@dp, S(0)@tp", "R@dp, S(1)@tp"),
    ("P@dp, R@tp", "R@dp, S(1)@tp"),
    # three axes
    ("P@dp, P@cp, P@tp", "R@dp, R@cp, R@tp"),
    ("S(0)@(dp,cp,tp)", "R@dp, R@cp, R@tp"),
    ("S(0)@(dp,tp), P@cp", "S(0)@(dp,tp,cp)"),
    ("S(0)@(dp,cp,tp)", "S(1)@(dp,cp,tp)"),
    ("S(0)@(dp,cp), S(1)@tp", "S(1)@(tp,cp), S(0)@dp"),
    # partials pending max / avg
    ("Pmax@dp, Pmax@tp", "R@dp, R@tp"),
    ("Pavg@dp, Pavg@tp", "R@dp, R@tp"),
    ("Pmax@dp, S(0)@tp", "R@dp, R@tp"),
)
"""(src, dst) specs (``TensorType.parse`` text) of docs/redistribute.md's table,
scripts/redistribute_savings.py and the tests."""


# --------------------------------------------------------------------------
# Planned steps
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedStep:
    """One collective or cast on one axis or a flattened tuple of axes.

    ``src``/``dst`` are the per-axis types the operation takes (a shard
    without its order, as the typed collectives take it); ``before`` and
    ``after`` are the whole spec around the step.  ``str(step)`` is
    ``all_gather((dp, tp), src=S(0), dst=R)``.
    """

    op: str
    axes: tuple[str, ...]
    src: AxisType
    dst: AxisType
    before: TensorType
    after: TensorType

    @property
    def collective(self) -> bool:
        """Whether the step communicates (casts do not)."""
        return self.op in COLLECTIVES

    @property
    def label(self) -> str:
        """``tp``, or ``(dp, tp)`` for a flattened tuple."""
        return self.axes[0] if len(self.axes) == 1 else "(" + ", ".join(self.axes) + ")"

    @property
    def expert(self) -> bool:
        """Whether the call needs ``expert_mode=True`` (redistribute passes it)."""
        return _needs_expert(self.op, self.src, self.dst)

    def call(self, tensor: str = "x") -> str:
        """The typed call that runs the step: ``all_gather(x, (dp, tp), src=S(0), dst=R)``."""
        flag = ", expert_mode=True" if self.expert else ""
        return f"{self.op}({tensor}, {self.label}, src={self.src}, dst={self.dst}{flag})"

    def __str__(self) -> str:
        return f"{self.op}({self.label}, src={self.src}, dst={self.dst})"


def collective_count(steps: Sequence[PlannedStep]) -> int:
    """How many of ``steps`` communicate."""
    return sum(step.collective for step in steps)


def received(steps: Sequence[PlannedStep], sizes: Optional[Mapping[str, int]] = None) -> Fraction:
    """Elements each rank receives over ``steps``, as a fraction of the global tensor.

    The ring cost model of :func:`plan`; axes not in ``sizes`` have
    :data:`DEFAULT_AXIS_SIZE` ranks.
    """
    total = Fraction(0)
    for step in steps:
        spec = _spec_of(step.before, "before", None)
        total += _cost(spec, step.op, step.axes, _size_of(sizes))
    return total


# --------------------------------------------------------------------------
# Specs: the planner's state
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Spec:
    """A partition spec: each axis's type (shards without order), each dim's axes major first."""

    types: tuple[tuple[str, AxisType], ...]
    """Sorted by axis name."""
    dims: tuple[tuple[int, tuple[str, ...]], ...]
    """Sorted by dim; only dims some axis shards."""

    def type_of(self, axis: str) -> AxisType:
        return dict(self.types)[axis]

    def on_dim(self, dim: int) -> tuple[str, ...]:
        return dict(self.dims).get(dim, ())

    def tensor_type(self) -> TensorType:
        orders = {axis: (order if len(axes) > 1 else None) for _, axes in self.dims for order, axis in enumerate(axes)}
        return TensorType.of(
            {
                axis: Shard(t.shard, orders[axis]) if t.shard is not None else t
                for axis, t in self.types
            }
        )


def _make(types: Mapping[str, AxisType], dims: Mapping[int, Sequence[str]]) -> _Spec:
    return _Spec(
        tuple(sorted(types.items())),
        tuple(sorted((dim, tuple(axes)) for dim, axes in dims.items() if axes)),
    )


def _error(axis: str, message: str) -> SpmdTypeError:
    return SpmdTypeError(Code.COLLECTIVE, axis, message)


def _dim(dim: int, ndim: Optional[int], axis: str, role: str) -> int:
    if ndim is None:
        return dim
    if not -ndim <= dim < ndim:
        raise _error(
            axis,
            f"redistribute's {role} shards dim {dim} on axis {axis}, but the tensor has {ndim} dims. "
            f"Fix: name a dim in [{-ndim}, {ndim - 1}].",
        )
    return dim % ndim


def _spec_of(tensor_type: TensorType, role: str, ndim: Optional[int]) -> _Spec:
    """Check one side of a redistribute and read it as a :class:`_Spec`."""
    types: dict[str, AxisType] = {}
    by_dim: dict[int, list[tuple[Optional[int], str]]] = {}
    for axis, t in tensor_type.axes:
        if axis in types:
            raise _error(
                axis,
                f"redistribute's {role} gives axis {axis} twice ({types[axis].on(axis)} and {t.on(axis)}). "
                "Fix: give each mesh axis one entry; several axes sharding one dim are one entry, e.g. "
                "S(0)@(dp, tp) (major axis first).",
            )
        if t.kind is Kind.V and t.shard is None:
            raise _error(
                axis,
                f"redistribute's {role} has {t.on(axis)}: a varying value without a shard dim has no "
                f"global layout to redistribute. Fix: write S(dim)@{axis} for the tensor dim {axis} "
                f"shards, or leave {axis} out of both src and dst (axes left out pass through unchanged).",
            )
        if t.shard is not None:
            dim = _dim(t.shard, ndim, axis, role)
            by_dim.setdefault(dim, []).append((t.order, axis))
            t = Shard(dim)
        types[axis] = t
    dims: dict[int, list[str]] = {}
    for dim, members in by_dim.items():
        orders = [order for order, _ in members]
        if len(members) > 1 and (None in orders or len(set(orders)) != len(orders)):
            names = sorted(axis for _, axis in members)
            written = ", ".join(f"S({dim})@{axis}" for axis in names)
            raise _error(
                names[0],
                f"redistribute's {role} shards dim {dim} over {', '.join(names)} ({written}) without "
                f"saying which is major, and the layout depends on it. Fix: write "
                f"S({dim})@({', '.join(names)}) with the major axis first.",
            )
        dims[dim] = [axis for _, axis in sorted(members, key=lambda m: m[0] or 0)]
    return _make(types, dims)


def spec_of_entries(entries: Iterable[tuple[str, AxisType]], role: str) -> TensorType:
    """``[("dp", S(0) order 0), ("tp", S(0) order 1)]`` (a spec as written) -> its TensorType.

    ``role`` (``"src"``/``"dst"``) names the side in the error for an axis
    given twice (``spmd-collective``).
    """
    mapping: dict[str, AxisType] = {}
    for axis, t in entries:
        if axis in mapping:
            raise _error(
                axis,
                f"redistribute's {role} gives axis {axis} twice ({mapping[axis].on(axis)} and {t.on(axis)}). "
                "Fix: give each mesh axis one entry; several axes sharding one dim are one entry, e.g. "
                "S(0)@(dp, tp) (major axis first).",
            )
        mapping[axis] = t
    return TensorType.of(mapping)


def validate(src: TensorType, dst: TensorType, ndim: Optional[int] = None) -> None:
    """Raise :class:`~spmd_stubs.core.SpmdTypeError` (``spmd-collective``) for an invalid request.

    Invalid: a V without a shard dim, an axis given twice, a dim sharded by
    several axes with no order (``S(0)@dp, S(0)@tp``), an axis named on one
    side only, a shard dim out of range (only when ``ndim`` is given), and
    resolving pending reductions that do not commute (``Pmax@dp, P@tp``).
    """
    _specs(src, dst, ndim)


def _specs(src: TensorType, dst: TensorType, ndim: Optional[int]) -> tuple[_Spec, _Spec]:
    start, goal = _spec_of(src, "src", ndim), _spec_of(dst, "dst", ndim)
    src_types, dst_types = dict(start.types), dict(goal.types)
    for one, other, one_name, other_name, given in (
        (src_types, dst_types, "src", "dst", src),
        (dst_types, src_types, "dst", "src", dst),
    ):
        for axis in one:
            if axis not in other:
                shown = given.get(axis)
                raise _error(
                    axis,
                    f"redistribute's {one_name} names axis {axis} ({shown.on(axis) if shown else axis}) "
                    f"but its {other_name} does not. Fix: name {axis} in both ({one[axis].on(axis)} "
                    f"in both keeps it), or leave it out of both (axes left out pass through unchanged).",
                )
    _check_reductions(src_types, dst_types)
    return start, goal


def _check_reductions(src: Mapping[str, AxisType], dst: Mapping[str, AxisType]) -> None:
    """Pending reductions that do not commute (a max and a sum) must not be resolved here.

    ``Pmax@dp, P@tp`` means ``max`` over dp of the sums over tp, or the sum
    over tp of the maxima over dp, depending on the program: which one the
    type does not say, so no plan can know which to resolve first.
    """
    partial = {axis: t for axis, t in src.items() if t.kind is Kind.P}
    reductions = {t.reduce for t in partial.values()}
    if len(reductions) < 2 or not any(t.extremum for t in partial.values()):
        return
    changed = [axis for axis, t in partial.items() if dst[axis] != t]
    if not changed:
        return
    shown = ", ".join(t.on(axis) for axis, t in partial.items())
    first = next(axis for axis in changed if partial[axis].extremum) if any(
        partial[axis].extremum for axis in changed
    ) else changed[0]
    raise _error(
        first,
        f"redistribute's src has pending reductions that do not commute ({shown}): the value depends "
        f"on which is resolved first, which the types do not say. Fix: resolve them in the order the "
        f"program means with separate calls, e.g. first all_reduce(x, {first}, src={partial[first]}, "
        f"dst=R), then redistribute the rest.",
    )


# --------------------------------------------------------------------------
# Moves: one (possibly flattened) step
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Move:
    op: str
    axes: tuple[str, ...]
    src: AxisType
    dst: AxisType


@functools.lru_cache(maxsize=None)
def _valid(op: str, src: AxisType, dst: AxisType) -> bool:
    """Whether ``op(src, dst)`` is a transition that keeps the value."""
    if src.shard is not None and dst.kind is Kind.P and dst.reduce != "sum":
        # A shard's value is the concatenation of the parts, a pending max
        # (min, avg) is their max: no cast turns one into the other.
        return False
    try:
        transition(op, src, dst, "axis", expert_mode=True)
    except SpmdTypeError:
        return False
    return True


@functools.lru_cache(maxsize=None)
def _needs_expert(op: str, src: AxisType, dst: AxisType) -> bool:
    try:
        transition(op, src, dst, "axis", expert_mode=False)
    except SpmdTypeError as error:
        return error.code is Code.EXPERT_MODE
    return False


def _edge(u: AxisType, v: AxisType) -> Optional[tuple[str, AxisType]]:
    """The route step from ``u`` toward ``v``: (op, the type it reaches), or None."""
    try:
        step = route(u, v)
    except SpmdTypeError:
        return None  # no one operation: the search goes through R
    if step is None or not _valid(step.op, step.src, step.dst):
        return None
    return step.op, step.dst


def _allowed(src: AxisType, dst: AxisType, dims: Sequence[int]) -> tuple[AxisType, ...]:
    """The types an axis may pass through between ``src`` and ``dst``.

    Its own two, R (gather out of the way, re-shard later; or resolve a
    reduction first), and, for a shard, a shard of any dim the request names
    (parking on another dim with an all_to_all).  A shard that becomes a
    pending sum takes the per-axis route's one step (see below).
    """
    if src == dst and src.shard is None:
        return (src,)
    if src.shard is not None and dst.kind is Kind.P:
        # A pending sum has many per-rank forms; zero-padding the shard where
        # it is (as the per-axis route does) keeps the plan's result equal to
        # the naive route's on every rank, not only in value.
        return (src, dst) if dst.reduce == "sum" else (src, Replicate, dst)
    out = [src, dst, Replicate]
    if src.shard is not None:
        out += [Shard(dim) for dim in dims]
    return tuple(dict.fromkeys(out))


def _apply(spec: _Spec, move: _Move) -> _Spec:
    types = dict(spec.types)
    dims = {dim: list(axes) for dim, axes in spec.dims}
    if move.src.shard is not None:
        dims[move.src.shard] = dims[move.src.shard][: -len(move.axes)]
    if move.dst.shard is not None:
        dims.setdefault(move.dst.shard, []).extend(move.axes)
    for axis in move.axes:
        types[axis] = move.dst
    return _make(types, dims)


def _groups(
    edge_src: AxisType, edge_dst: AxisType, members: list[str], spec: _Spec, mesh_order: Optional[Sequence[str]]
) -> Iterator[tuple[str, ...]]:
    """The tuples of ``members`` that one step with this edge can run on.

    Leaving a dim: a suffix of its axes (major first, the flattened group's
    order).  Arriving on a dim: any ordered selection (it becomes the new
    minor part, in that order).  Otherwise: any subset, in ``members``' order.
    With ``mesh_order``, a tuple of several axes must follow it.
    """
    if edge_src.shard is not None:
        on_dim = spec.on_dim(edge_src.shard)
        candidates: Iterator[tuple[str, ...]] = (
            on_dim[-length:] for length in range(1, len(on_dim) + 1) if set(on_dim[-length:]) <= set(members)
        )
    elif edge_dst.shard is not None:
        candidates = (g for length in range(1, len(members) + 1) for g in itertools.permutations(members, length))
    else:
        candidates = (g for length in range(1, len(members) + 1) for g in itertools.combinations(members, length))
    for group in candidates:
        if len(group) == 1 or mesh_order is None or _follows(group, mesh_order):
            yield group


def _follows(group: Sequence[str], mesh_order: Sequence[str]) -> bool:
    positions = [mesh_order.index(axis) if axis in mesh_order else -1 for axis in group]
    return -1 not in positions and positions == sorted(positions)


def _moves(
    spec: _Spec,
    allowed: Mapping[str, tuple[AxisType, ...]],
    order: Sequence[str],
    mesh_order: Optional[Sequence[str]],
) -> Iterator[_Move]:
    types = dict(spec.types)
    edges: dict[tuple[str, AxisType, AxisType], list[str]] = {}
    for axis in order:
        u = types[axis]
        for v in allowed[axis]:
            if v == u:
                continue
            edge = _edge(u, v)
            if edge is None or edge[1] not in allowed[axis]:
                continue
            members = edges.setdefault((edge[0], u, edge[1]), [])
            if axis not in members:
                members.append(axis)
    for (op, u, v), members in edges.items():
        for group in _groups(u, v, members, spec, mesh_order):
            yield _Move(op, group, u, v)


def _size_of(sizes: Optional[Mapping[str, int]]) -> "functools.partial[int]":
    return functools.partial(_lookup_size, dict(sizes or {}))


def _lookup_size(sizes: dict[str, int], axis: str) -> int:
    return sizes.get(axis, DEFAULT_AXIS_SIZE)


def _cost(spec: _Spec, op: str, axes: Sequence[str], size: "functools.partial[int]") -> Fraction:
    """Elements one rank receives in ``op`` (ring algorithms), as a fraction of the global tensor."""
    if op not in COLLECTIVES:
        return Fraction(0)
    local = Fraction(1)
    for _, sharding in spec.dims:
        for axis in sharding:
            local /= size(axis)
    n = 1
    for axis in axes:
        n *= size(axis)
    if op == "all_gather":
        return (n - 1) * local
    if op == "all_reduce":
        return 2 * Fraction(n - 1, n) * local
    return Fraction(n - 1, n) * local  # reduce_scatter, all_to_all


def _steps(start: _Spec, moves: Sequence[_Move]) -> list[PlannedStep]:
    out, spec = [], start
    for move in moves:
        after = _apply(spec, move)
        out.append(PlannedStep(move.op, move.axes, move.src, move.dst, spec.tensor_type(), after.tensor_type()))
        spec = after
    return out


def _order(start: _Spec, mesh_order: Optional[Sequence[str]]) -> tuple[str, ...]:
    """The request's axes, those of ``mesh_order`` first in its order, the rest by name."""
    names = [axis for axis, _ in start.types]
    given = [axis for axis in (mesh_order or ()) if axis in names]
    return tuple(dict.fromkeys([*given, *names]))


# --------------------------------------------------------------------------
# The naive per-axis route
# --------------------------------------------------------------------------


def _kept(spec: _Spec, goal: _Spec, dim: int) -> int:
    """How many of ``dim``'s axes (major first) are already where ``goal`` wants them."""
    kept = 0
    for have, want in zip(spec.on_dim(dim), goal.on_dim(dim)):
        if have != want:
            break
        kept += 1
    return kept


def _placed(spec: _Spec, goal: _Spec, axis: str) -> bool:
    t = spec.type_of(axis)
    if t != goal.type_of(axis):
        return False
    return t.shard is None or spec.on_dim(t.shard).index(axis) < _kept(spec, goal, t.shard)


def _direct(spec: _Spec, goal: _Spec, axis: str, toward: AxisType) -> Optional[_Move]:
    """``axis``'s route step toward ``toward``, if the minor-axis rule allows it now."""
    u = spec.type_of(axis)
    edge = _edge(u, toward)
    if edge is None:
        return None
    op, reached = edge
    if u.shard is not None and spec.on_dim(u.shard)[-1] != axis:
        return None  # only the minor axis of a dim leaves it
    if reached.shard is not None:
        arriving = (*spec.on_dim(reached.shard), axis)
        if goal.on_dim(reached.shard)[: len(arriving)] != arriving or reached != goal.type_of(axis):
            return None  # it would not arrive where the goal has it
    return _Move(op, (axis,), u, reached)


def _naive(start: _Spec, goal: _Spec, order: Sequence[str]) -> list[_Move]:
    moves: list[_Move] = []
    spec = start
    while spec != goal:
        pending = [axis for axis in order if not _placed(spec, goal, axis)]
        move = next((m for m in (_direct(spec, goal, a, goal.type_of(a)) for a in pending) if m), None)
        if move is None:
            # Every remaining step is blocked: gather a minor axis that must
            # leave its dim to R (it is re-sharded later), or take an axis
            # with no single step to its destination through R.
            leaving = [a for a in pending if spec.type_of(a).shard is not None]
            stuck = [a for a in pending if a not in leaving and _edge(spec.type_of(a), goal.type_of(a)) is None]
            move = next((m for m in (_direct(spec, goal, a, Replicate) for a in leaving + stuck) if m), None)
        if move is None:  # pragma: no cover -- every type reaches R and R reaches every type
            raise _error(pending[0], f"no per-axis route from {start.tensor_type()} to {goal.tensor_type()}")
        moves.append(move)
        spec = _apply(spec, move)
        if len(moves) > 4 * len(order) + 4:  # pragma: no cover -- each axis takes at most 3 steps
            raise _error(pending[0], f"no per-axis route from {start.tensor_type()} to {goal.tensor_type()}")
    return moves


# --------------------------------------------------------------------------
# The search
# --------------------------------------------------------------------------


def _search(
    start: _Spec,
    goal: _Spec,
    mesh_order: Optional[Sequence[str]],
    size: "functools.partial[int]",
    bound: tuple[int, int],
) -> list[_Move]:
    """Dijkstra on (elements received, collectives, steps), within ``bound`` (collectives, steps)."""
    order = _order(start, mesh_order)
    dims = sorted({dim for spec in (start, goal) for dim, _ in spec.dims})
    allowed = {axis: _allowed(start.type_of(axis), goal.type_of(axis), dims) for axis in order}
    tie = itertools.count()
    heap: list[tuple[tuple[Fraction, int, int], int, _Spec, tuple[_Move, ...]]] = [
        ((Fraction(0), 0, 0), next(tie), start, ())
    ]
    done: dict[_Spec, list[tuple[int, int]]] = {}
    while heap:
        (volume, collectives, steps), _, spec, path = heapq.heappop(heap)
        if spec == goal:
            return list(path)
        # Popped in volume order: an earlier pop with no more collectives
        # and steps dominates this one.
        seen = done.setdefault(spec, [])
        if any(c <= collectives and s <= steps for c, s in seen):
            continue
        seen.append((collectives, steps))
        for move in _moves(spec, allowed, order, mesh_order):
            c = collectives + (move.op in COLLECTIVES)
            s = steps + 1
            if c > bound[0] or s > bound[1]:
                continue
            cost = (volume + _cost(spec, move.op, move.axes, size), c, s)
            heapq.heappush(heap, (cost, next(tie), _apply(spec, move), (*path, move)))
    raise AssertionError("the naive route is within the bound, so the search finds a plan")  # pragma: no cover


# --------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------


def naive_plan(
    src: TensorType,
    dst: TensorType,
    *,
    ndim: Optional[int] = None,
    mesh_order: Optional[Sequence[str]] = None,
) -> list[PlannedStep]:
    """The per-axis route from spec ``src`` to spec ``dst``: one axis per step.

    Each axis takes :func:`spmd_stubs.core.route`'s step from its type to
    its destination when the minor-axis rule allows it (it leaves a dim only
    as the minor axis, it arrives as the next axis ``dst`` wants there);
    when no axis can, the first minor axis that must leave is gathered to R
    and re-sharded later.  Axes are tried in ``mesh_order``, then by name.  ``ndim`` (the tensor's rank) lets ``S(-1)`` and ``S(ndim-1)``
    mean the same dim.

    ``S(0)@(dp,tp) -> R@dp, R@tp`` is ``all_gather(tp, S(0), R)`` then
    ``all_gather(dp, S(0), R)``.
    """
    start, goal = _specs(src, dst, ndim)
    return _steps(start, _naive(start, goal, _order(start, mesh_order)))


def plan(
    src: TensorType,
    dst: TensorType,
    *,
    sizes: Optional[Mapping[str, int]] = None,
    ndim: Optional[int] = None,
    mesh_order: Optional[Sequence[str]] = None,
) -> list[PlannedStep]:
    """The planned route from spec ``src`` to spec ``dst``, flattening where it pays.

    Among the plans of (possibly flattened) route steps that use no more
    collectives and no more steps than :func:`naive_plan`, the one whose
    ranks receive the fewest elements (ring algorithms: an all_gather over
    n ranks receives n-1 local parts, an all_reduce 2(n-1)/n, a
    reduce_scatter or all_to_all (n-1)/n of the local tensor), then the
    fewest collectives, then the fewest steps.  ``sizes`` gives the axis
    sizes (default :data:`DEFAULT_AXIS_SIZE` each); ``ndim`` as in
    :func:`naive_plan`.  ``mesh_order`` (the mesh's dim names): every
    flattened tuple follows it, as ``DeviceMesh`` flattens only in its own
    order (the simulated world builds no other groups; real ranks can, by an
    exchange the first time); where the order does not matter (all_reduce,
    the converts among R, I and P) tuples are written in it, else by name.

    Examples (2 x 2 mesh)::

        P@dp, P@tp        -> R@dp, R@tp        all_reduce((dp, tp), src=P, dst=R)
        S(0)@(dp,tp)      -> R@dp, R@tp        all_gather((dp, tp), src=S(0), dst=R)
        P@dp, P@tp        -> S(0)@(dp,tp)      reduce_scatter((dp, tp), src=P, dst=S(0))
        S(0)@(dp,tp)      -> S(1)@(dp,tp)      all_to_all((dp, tp), src=S(0), dst=S(1))
        S(0)@(dp,tp)      -> S(0)@(tp,dp)      all_gather((dp, tp), src=S(0), dst=R),
                                               convert((tp, dp), src=R, dst=S(0))

    Raises :class:`~spmd_stubs.core.SpmdTypeError` as :func:`validate`.
    """
    key = tuple(sorted((sizes or {}).items()))
    return list(_plan(src, dst, key, ndim, None if mesh_order is None else tuple(mesh_order)))


@functools.lru_cache(maxsize=1024)
def _plan(
    src: TensorType,
    dst: TensorType,
    sizes: tuple[tuple[str, int], ...],
    ndim: Optional[int],
    mesh_order: Optional[tuple[str, ...]],
) -> tuple[PlannedStep, ...]:
    start, goal = _specs(src, dst, ndim)
    naive = _naive(start, goal, _order(start, mesh_order))
    bound = (sum(m.op in COLLECTIVES for m in naive), len(naive))
    return tuple(_steps(start, _search(start, goal, mesh_order, _size_of(dict(sizes)), bound)))
