"""Planning ``redistribute`` between two partition specs (docs/spec.md#global-spmd).

Pure Python (no torch, no mypy): the runtime executes a plan with the typed
collectives, the plugin only needs :func:`validate` and the destination type.
The specs and the moves between them are :mod:`spmd_stubs.core.partition_specs`;
this module is the cost model, the naive route and the search.

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
from typing import Callable, Mapping, Optional, Sequence

from spmd_stubs.core.axis_types import AxisType, Replicate, TensorType
from spmd_stubs.core.comms import COLLECTIVES
from spmd_stubs.core.partition_specs import (
    Move,
    Spec,
    allowed,
    apply,
    edge,
    error,
    moves,
    needs_expert,
    spec_of,
    spec_of_entries,
    specs,
    validate,
)

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
# Planned steps and their cost
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
        return needs_expert(self.op, self.src, self.dst)

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
    size = _size_of(sizes)
    return sum((_cost(spec_of(step.before, "before", None), step.op, step.axes, size) for step in steps), Fraction(0))


def _size_of(sizes: Optional[Mapping[str, int]]) -> Callable[[str], int]:
    """Each axis's size: ``sizes``' entry, else :data:`DEFAULT_AXIS_SIZE`."""
    known = dict(sizes or {})
    return lambda axis: known.get(axis, DEFAULT_AXIS_SIZE)


def _cost(spec: Spec, op: str, axes: Sequence[str], size: Callable[[str], int]) -> Fraction:
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


def _steps(start: Spec, path: Sequence[Move]) -> list[PlannedStep]:
    """The moves of ``path`` from ``start``, each with the whole spec before and after it."""
    out, spec = [], start
    for move in path:
        after = apply(spec, move)
        out.append(PlannedStep(move.op, move.axes, move.src, move.dst, spec.tensor_type(), after.tensor_type()))
        spec = after
    return out


def _order(start: Spec, mesh_order: Optional[Sequence[str]]) -> tuple[str, ...]:
    """The request's axes, those of ``mesh_order`` first in its order, the rest by name."""
    names = [axis for axis, _ in start.types]
    given = [axis for axis in (mesh_order or ()) if axis in names]
    return tuple(dict.fromkeys([*given, *names]))


# --------------------------------------------------------------------------
# The naive per-axis route
# --------------------------------------------------------------------------


def _kept(spec: Spec, goal: Spec, dim: int) -> int:
    """How many of ``dim``'s axes (major first) are already where ``goal`` wants them."""
    kept = 0
    for have, want in zip(spec.on_dim(dim), goal.on_dim(dim)):
        if have != want:
            break
        kept += 1
    return kept


def _placed(spec: Spec, goal: Spec, axis: str) -> bool:
    """Whether ``axis`` has its goal type and, for a shard, its goal place on the dim."""
    t = spec.type_of(axis)
    if t != goal.type_of(axis):
        return False
    return t.shard is None or spec.on_dim(t.shard).index(axis) < _kept(spec, goal, t.shard)


def _direct(spec: Spec, goal: Spec, axis: str, toward: AxisType) -> Optional[Move]:
    """``axis``'s route step toward ``toward``, if the minor-axis rule allows it now."""
    u = spec.type_of(axis)
    step = edge(u, toward)
    if step is None:
        return None
    op, reached = step
    if u.shard is not None and spec.on_dim(u.shard)[-1] != axis:
        return None  # only the minor axis of a dim leaves it
    if reached.shard is not None:
        arriving = (*spec.on_dim(reached.shard), axis)
        if goal.on_dim(reached.shard)[: len(arriving)] != arriving or reached != goal.type_of(axis):
            return None  # it would not arrive where the goal has it
    return Move(op, (axis,), u, reached)


def _naive_step(spec: Spec, goal: Spec, order: Sequence[str]) -> Optional[Move]:
    """The first axis (in ``order``) that can take its route step does; else a blocked one goes to R."""
    pending = [axis for axis in order if not _placed(spec, goal, axis)]
    move = next((m for m in (_direct(spec, goal, a, goal.type_of(a)) for a in pending) if m), None)
    if move is not None:
        return move
    # Every remaining step is blocked: gather a minor axis that must leave its
    # dim to R (it is re-sharded later), or take an axis with no single step
    # to its destination through R.
    leaving = [a for a in pending if spec.type_of(a).shard is not None]
    stuck = [a for a in pending if a not in leaving and edge(spec.type_of(a), goal.type_of(a)) is None]
    return next((m for m in (_direct(spec, goal, a, Replicate) for a in leaving + stuck) if m), None)


def _naive(start: Spec, goal: Spec, order: Sequence[str]) -> list[Move]:
    """The moves of :func:`naive_plan`."""
    path: list[Move] = []
    spec = start
    while spec != goal:
        move = _naive_step(spec, goal, order)
        # Every type reaches R and R every type, so each axis takes at most 3 steps.
        if move is None or len(path) > 4 * len(order) + 4:  # pragma: no cover
            axis = next(a for a in order if not _placed(spec, goal, a))
            raise error(axis, f"no per-axis route from {start.tensor_type()} to {goal.tensor_type()}")
        path.append(move)
        spec = apply(spec, move)
    return path


# --------------------------------------------------------------------------
# The search
# --------------------------------------------------------------------------


def _search(
    start: Spec,
    goal: Spec,
    mesh_order: Optional[Sequence[str]],
    size: Callable[[str], int],
    bound: tuple[int, int],
) -> list[Move]:
    """Dijkstra on (elements received, collectives, steps), within ``bound`` (collectives, steps)."""
    order = _order(start, mesh_order)
    dims = sorted({dim for spec in (start, goal) for dim, _ in spec.dims})
    within = {axis: allowed(start.type_of(axis), goal.type_of(axis), dims) for axis in order}
    tie = itertools.count()
    heap: list[tuple[tuple[Fraction, int, int], int, Spec, tuple[Move, ...]]] = [
        ((Fraction(0), 0, 0), next(tie), start, ())
    ]
    done: dict[Spec, list[tuple[int, int]]] = {}
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
        for move in moves(spec, within, order, mesh_order):
            c = collectives + (move.op in COLLECTIVES)
            s = steps + 1
            if c > bound[0] or s > bound[1]:
                continue
            cost = (volume + _cost(spec, move.op, move.axes, size), c, s)
            heapq.heappush(heap, (cost, next(tie), apply(spec, move), (*path, move)))
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
    and re-sharded later.  Axes are tried in ``mesh_order``, then by name.
    ``ndim`` (the tensor's rank) lets ``S(-1)`` and ``S(ndim-1)`` mean the
    same dim.

    ``S(0)@(dp,tp) -> R@dp, R@tp`` is ``all_gather(tp, S(0), R)`` then
    ``all_gather(dp, S(0), R)``.
    """
    start, goal = specs(src, dst, ndim)
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
    """:func:`plan`, cached on hashable arguments (the runtime plans every call)."""
    start, goal = specs(src, dst, ndim)
    naive = _naive(start, goal, _order(start, mesh_order))
    bound = (sum(m.op in COLLECTIVES for m in naive), len(naive))
    return tuple(_steps(start, _search(start, goal, mesh_order, _size_of(dict(sizes)), bound)))
