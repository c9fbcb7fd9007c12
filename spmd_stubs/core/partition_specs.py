"""Partition specs as the planner's states, and the moves between them.

:mod:`spmd_stubs.core.planner` plans ``redistribute`` between two partition
specs (docs/spec.md#global-spmd).  This module is its state space: a
:class:`Spec` is a checked partition spec (each axis's type, each sharded
dim's axes major first), a :class:`Move` is one route step on one axis or a
flattened tuple of axes, and :func:`moves` lists the moves the minor-axis
rule allows from a spec.  :func:`validate` and :func:`specs` check a request
before anything is planned.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping, Optional, Sequence

from spmd_stubs.core.axis_types import AxisType, Kind, Replicate, Shard, TensorType, tensor_type_from
from spmd_stubs.core.comms import route, transition
from spmd_stubs.core.errors import Code, SpmdTypeError

__all__ = [
    "Spec",
    "Move",
    "validate",
    "spec_of_entries",
    "spec_of",
    "specs",
    "apply",
    "edge",
    "allowed",
    "moves",
    "needs_expert",
    "error",
]


# --------------------------------------------------------------------------
# Specs
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
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
        """The spec as written: a shard of a dim several axes split carries its order."""
        orders = {axis: (order if len(axes) > 1 else None) for _, axes in self.dims for order, axis in enumerate(axes)}
        return TensorType.of(
            {axis: Shard(t.shard, orders[axis]) if t.shard is not None else t for axis, t in self.types}
        )


def _make(types: Mapping[str, AxisType], dims: Mapping[int, Sequence[str]]) -> Spec:
    return Spec(
        tuple(sorted(types.items())),
        tuple(sorted((dim, tuple(axes)) for dim, axes in dims.items() if axes)),
    )


def error(axis: str, message: str) -> SpmdTypeError:
    """A request redistribute refuses is ``spmd-collective``."""
    return SpmdTypeError(Code.COLLECTIVE, axis, message)


def _dim(dim: int, ndim: Optional[int], axis: str, role: str) -> int:
    """``dim`` made non-negative, checked against the tensor's rank where it is known."""
    if ndim is None:
        return dim
    if not -ndim <= dim < ndim:
        raise error(
            axis,
            f"redistribute's {role} shards dim {dim} on axis {axis}, but the tensor has {ndim} dims. "
            f"Fix: name a dim in [{-ndim}, {ndim - 1}].",
        )
    return dim % ndim


def spec_of(tensor_type: TensorType, role: str, ndim: Optional[int]) -> Spec:
    """Check one side of a redistribute and read it as a :class:`Spec`."""
    types: dict[str, AxisType] = {}
    by_dim: dict[int, list[tuple[Optional[int], str]]] = {}
    spec_of_entries(tensor_type.axes, role)  # a type built from raw entries may repeat an axis
    for axis, t in tensor_type.axes:
        if t.kind is Kind.V and t.shard is None:
            raise error(
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
    return _make(types, {dim: _major_first(dim, members, role) for dim, members in by_dim.items()})


def _major_first(dim: int, members: list[tuple[Optional[int], str]], role: str) -> list[str]:
    """The axes sharding ``dim``, major first; several need distinct orders."""
    orders = [order for order, _ in members]
    if len(members) > 1 and (None in orders or len(set(orders)) != len(orders)):
        names = sorted(axis for _, axis in members)
        written = ", ".join(f"S({dim})@{axis}" for axis in names)
        raise error(
            names[0],
            f"redistribute's {role} shards dim {dim} over {', '.join(names)} ({written}) without "
            f"saying which is major, and the layout depends on it. Fix: write "
            f"S({dim})@({', '.join(names)}) with the major axis first.",
        )
    return [axis for _, axis in sorted(members, key=lambda m: m[0] or 0)]


def spec_of_entries(entries: Iterable[tuple[str, AxisType]], role: str) -> TensorType:
    """``[("dp", S(0) order 0), ("tp", S(0) order 1)]`` (a spec as written) -> its TensorType.

    ``role`` (``"src"``/``"dst"``) names the side in the error for an axis
    given twice (``spmd-collective``).
    """
    return tensor_type_from(entries, where=f"redistribute's {role}", code=Code.COLLECTIVE)


def validate(src: TensorType, dst: TensorType, ndim: Optional[int] = None) -> None:
    """Raise :class:`~spmd_stubs.core.SpmdTypeError` (``spmd-collective``) for an invalid request.

    Invalid: a V without a shard dim, an axis given twice, a dim sharded by
    several axes with no order (``S(0)@dp, S(0)@tp``), an axis named on one
    side only, a shard dim out of range (only when ``ndim`` is given), and
    resolving pending reductions that do not commute (``Pmax@dp, P@tp``).
    """
    specs(src, dst, ndim)


def specs(src: TensorType, dst: TensorType, ndim: Optional[int]) -> tuple[Spec, Spec]:
    """The request's two sides as specs, checked as :func:`validate` says."""
    start, goal = spec_of(src, "src", ndim), spec_of(dst, "dst", ndim)
    src_types, dst_types = dict(start.types), dict(goal.types)
    for one, other, one_name, other_name, given in (
        (src_types, dst_types, "src", "dst", src),
        (dst_types, src_types, "dst", "src", dst),
    ):
        for axis in one:
            if axis not in other:
                shown = given.get(axis)
                raise error(
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
    type does not say, so no plan can know which to resolve first
    (docs/spec.md#deviations).
    """
    partial = {axis: t for axis, t in src.items() if t.kind is Kind.P}
    reductions = {t.reduce for t in partial.values()}
    if len(reductions) < 2 or not any(t.extremum for t in partial.values()):
        return
    changed = [axis for axis, t in partial.items() if dst[axis] != t]
    if not changed:
        return
    shown = ", ".join(t.on(axis) for axis, t in partial.items())
    first = next((axis for axis in changed if partial[axis].extremum), changed[0])
    raise error(
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
class Move:
    """``op`` from ``src`` to ``dst`` on ``axes`` (one axis, or a flattened tuple major first)."""

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
def needs_expert(op: str, src: AxisType, dst: AxisType) -> bool:
    """Whether ``op(src, dst)`` needs ``expert_mode=True`` (docs/spec.md#expert-mode)."""
    try:
        transition(op, src, dst, "axis", expert_mode=False)
    except SpmdTypeError as err:
        return err.code is Code.EXPERT_MODE
    return False


def edge(u: AxisType, v: AxisType) -> Optional[tuple[str, AxisType]]:
    """The route step from ``u`` toward ``v``: (op, the type it reaches), or None."""
    try:
        step = route(u, v)
    except SpmdTypeError:
        return None  # no one operation: the search goes through R
    if step is None or not _valid(step.op, step.src, step.dst):
        return None
    return step.op, step.dst


def allowed(src: AxisType, dst: AxisType, dims: Sequence[int]) -> tuple[AxisType, ...]:
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


def apply(spec: Spec, move: Move) -> Spec:
    """The spec after ``move``: its axes leave the end of their dim, or arrive as its new minor part."""
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
    edge_src: AxisType, edge_dst: AxisType, members: list[str], spec: Spec, mesh_order: Optional[Sequence[str]]
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


def moves(
    spec: Spec,
    allowed_types: Mapping[str, tuple[AxisType, ...]],
    order: Sequence[str],
    mesh_order: Optional[Sequence[str]],
) -> Iterator[Move]:
    """Every move from ``spec`` that keeps each axis within its ``allowed_types``.

    Axes (in ``order``) taking the same route step are grouped, and each
    tuple of them the minor-axis rule allows is one move.
    """
    types = dict(spec.types)
    edges: dict[tuple[str, AxisType, AxisType], list[str]] = {}
    for axis in order:
        u = types[axis]
        for v in allowed_types[axis]:
            if v == u:
                continue
            step = edge(u, v)
            if step is None or step[1] not in allowed_types[axis]:
                continue
            members = edges.setdefault((step[0], u, step[1]), [])
            if axis not in members:
                members.append(axis)
    for (op, u, v), members in edges.items():
        for group in _groups(u, v, members, spec, mesh_order):
            yield Move(op, group, u, v)
