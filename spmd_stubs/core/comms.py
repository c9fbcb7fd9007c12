"""Collectives and casts: which src/dst pairs exist, and their backward.

:data:`TRANSITIONS` is the table: one :class:`Transition` row per valid
(op, src kind, dst kind).  :func:`transition` says whether ``convert(I, P)``
(or any collective or cast with a src/dst pair) exists, whether it needs
``expert_mode``, and what to call instead when it does not
(docs/spec.md#transitions).  :func:`dual` and :func:`backward_of` give the
gradient type and the backward operation of every forward operation
(docs/spec.md#forward-and-backward).
"""

from __future__ import annotations

from dataclasses import dataclass

from spmd_stubs.core.axis_types import AxisType, Kind, Replicate, Varying
from spmd_stubs.core.errors import Code, Fix, SpmdTypeError, Target

_DUAL_KIND = {Kind.R: Kind.P, Kind.P: Kind.R, Kind.I: Kind.I, Kind.V: Kind.V}


def dual(axis_type: AxisType) -> AxisType:
    """The gradient's type: R <-> P, I <-> I, V <-> V (a shard keeps its dim).

    A pending avg's gradient is replicated (each part gets ``g / n``); a
    pending max's or min's varies (the part that attains it gets ``g``, split
    between ties), so those two are V.
    """
    if axis_type.extremum:
        return Varying
    return AxisType(_DUAL_KIND[axis_type.kind], axis_type.shard, axis_type.order)


# --------------------------------------------------------------------------
# Transitions: collectives and casts
# --------------------------------------------------------------------------

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
CASTS = ("reinterpret", "convert")
IMPLICIT_PARTIAL = ("all_reduce", "reduce_scatter")
"""Collectives that accept src=V as shorthand for reinterpret(V,P) then src=P."""


@dataclass(frozen=True)
class Step:
    """One operation with its src/dst, e.g. ``all_reduce(P, I)``."""

    op: str
    src: AxisType
    dst: AxisType

    def call(self, axis: str, tensor: str = "x", expert: bool = False) -> str:
        """The call the user writes: ``all_reduce(x, tp, src=P, dst=I)``."""
        flag = ", expert_mode=True" if expert else ""
        return f"{self.op}({tensor}, {axis}, src={self.src}, dst={self.dst}{flag})"

    def __str__(self) -> str:
        return f"{self.op}({self.src},{self.dst})"


@dataclass(frozen=True)
class Transition:
    """One valid ``op(src, dst)`` by kinds: a row of docs/spec.md#transitions.

    ``backward`` is the operation autograd runs for the gradient, from
    ``dual(dst)`` to ``dual(src)`` (docs/spec.md#forward-and-backward).
    ``kernel`` names the forward kernel in :mod:`spmd_stubs._kernels` (a name:
    the core does not import torch).  ``reason`` says what a gated row does
    (``{axis}`` is the axis); a row with a reason needs ``expert_mode=True``
    (docs/spec.md#expert-mode).  ``any_reduce``: the row also exists where its
    P pends an avg, max or min, not only a sum (docs/spec.md#pending-reductions).
    """

    op: str
    src: Kind
    dst: Kind
    backward: str
    kernel: str
    any_reduce: bool = False
    reason: str = ""

    @property
    def gated(self) -> bool:
        """Whether the row needs ``expert_mode=True``."""
        return bool(self.reason)

    @property
    def key(self) -> tuple[str, Kind, Kind]:
        """(op, src kind, dst kind): what the table is looked up by."""
        return (self.op, self.src, self.dst)


R, I, V, P = Kind.R, Kind.I, Kind.V, Kind.P  # noqa: E741

# docs/spec.md#transitions and #forward-and-backward, in the docs' order.  Per
# docs/spec.md#deviations, convert(I,R) (identity forward, all-reduce backward,
# Megatron's copy_to_tensor_model_parallel_region) and its gated mirror
# convert(R,I) are rows, and reinterpret(I,P) deliberately is not.
TRANSITIONS: tuple[Transition, ...] = (
    Transition(
        "reinterpret", R, I, "convert", "identity",
        reason="treats a replicate value as invariant; it is the backward of convert(I,P) and has no natural "
        "forward use",
    ),
    Transition(
        "reinterpret", R, V, "reinterpret", "identity",
        reason="declares N copies of a replicated value as varying; to shard a replicated value use "
        "convert(x, {axis}, src=R, dst=V) or dst=S(i)",
    ),
    Transition(
        "reinterpret", R, P, "reinterpret", "identity",
        reason="scales the value by the axis size (each rank's copy joins the pending sum); to keep the value "
        "use convert(x, {axis}, src=R, dst=P)",
    ),
    Transition("reinterpret", I, R, "all_reduce", "identity"),
    Transition("reinterpret", I, V, "all_reduce", "identity"),
    Transition("reinterpret", V, P, "reinterpret", "identity", any_reduce=True),
    Transition("convert", R, V, "convert", "keep_slice"),
    Transition("convert", R, P, "convert", "keep_first", any_reduce=True),
    Transition("convert", I, R, "all_reduce", "identity"),
    Transition(
        "convert", R, I, "convert", "identity",
        reason="drops the gradient reduction of a replicate value; it is reinterpret(R,I) and has no natural "
        "forward use",
    ),
    Transition("convert", I, V, "all_gather", "keep_slice"),
    Transition(
        "convert", I, P, "reinterpret", "keep_first",
        reason="zeros every rank but rank 0; it is the backward of reinterpret(R,I)",
    ),
    Transition(
        "convert", V, P, "convert", "zero_pad",
        reason="zero-pads each rank's part into a partial sum; it is the backward of convert(R,V)",
    ),
    Transition("all_reduce", P, R, "all_reduce", "all_reduce", any_reduce=True),
    Transition("all_reduce", P, I, "reinterpret", "all_reduce", any_reduce=True),
    Transition("all_gather", V, R, "reduce_scatter", "all_gather"),
    Transition("all_gather", V, I, "convert", "all_gather"),
    Transition("reduce_scatter", P, V, "all_gather", "reduce_scatter", any_reduce=True),
    Transition("all_to_all", V, V, "all_to_all", "all_to_all"),
)

_ROWS: dict[tuple[str, Kind, Kind], Transition] = {row.key: row for row in TRANSITIONS}

# redistribute's routing table, and what an error suggests instead of an
# invalid pair: the row that keeps the value (every op but reinterpret does,
# and no two such rows share a src/dst pair; a test checks that).
_ROUTE: dict[tuple[Kind, Kind], str] = {(row.src, row.dst): row.op for row in TRANSITIONS if row.op != "reinterpret"}


def row_of(step: Step) -> Transition:
    """The row of ``step`` by kinds (``KeyError`` where the table has none).

    The implicit ``reinterpret(V,P)`` is not applied: ``all_reduce(V, R)``
    has no row, ``all_reduce(P, R)`` has.
    """
    return _ROWS[(step.op, step.src.kind, step.dst.kind)]


def _non_sum(axis_type: AxisType) -> bool:
    return axis_type.kind is P and axis_type.reduce != "sum"


def route(src: AxisType, dst: AxisType, axis: str = "axis") -> Step | None:
    """The semantics-preserving operation from ``src`` to ``dst`` (None: no-op).

    This is ``redistribute``'s routing table: comms where the value must move,
    ``convert`` where a local change keeps the meaning.  A pending avg/max/min
    is made only from a replicated value, and one reduction never becomes
    another in one operation: those raise ``spmd-collective`` with the two
    steps to write instead.
    """
    two_steps = _two_steps(src, dst, axis)
    if two_steps:
        raise SpmdTypeError(
            Code.COLLECTIVE,
            axis,
            f"redistribute(src={src}, dst={dst}) on axis {axis} has no single operation that keeps "
            f"the value. Fix: {two_steps}.",
            Fix(Target.CALL, _two_step_template(src, dst, axis)),
        )
    if src == dst or (src.kind is dst.kind and src.kind is not V):
        return None
    if src.kind is V and dst.kind is V and (src.shard is None or dst.shard is None):
        # V and S(i) are the same local type; only S(i)->S(j) moves data.
        return None
    return Step(_ROUTE[(src.kind, dst.kind)], src, dst)


def _through_replicate(src: AxisType, dst: AxisType) -> Step | None:
    """The first of two steps from ``src`` to ``dst`` where no one operation keeps the value: to R,
    from which ``convert`` makes ``dst`` (None where one operation does)."""
    if src.kind is P and dst.kind is P and src.reduce != dst.reduce:
        return Step("all_reduce", src, Replicate)
    if _non_sum(dst) and src.kind is not R and src.kind is not P:
        return Step(_ROUTE[(src.kind, R)], src, Replicate)
    return None


def _two_step_template(src: AxisType, dst: AxisType, axis: str) -> str:
    """The two steps through R as one rewrite of the value ``{x}`` (only where they are needed)."""
    via = _through_replicate(src, dst)
    assert via is not None
    return f"convert({via.call(axis, '{x}')}, {axis}, src=R, dst={dst})"


def _two_steps(src: AxisType, dst: AxisType, axis: str) -> str:
    """The two calls from ``src`` to ``dst`` where no one operation keeps the value ('' otherwise)."""
    via = _through_replicate(src, dst)
    return f"{via.call(axis)}, then convert(x, {axis}, src=R, dst={dst})" if via else ""


def _allowed_forms(op: str, src: AxisType, dst: AxisType) -> bool:
    """Shape constraints beyond the kinds: all_to_all pairs V/V or S/S."""
    if op == "all_to_all":
        return (src.shard is None) == (dst.shard is None)
    if op == "reinterpret":
        # A reinterpret never changes the local tensor, so it has no shard
        # dim to choose: a shard in or out means convert.
        return dst.shard is None
    return True


def instead(src: AxisType, dst: AxisType, axis: str) -> str:
    """The call an invalid pair names instead: the route, or the two steps through R.

    docs/spec.md#transitions, "What an invalid pair names instead".
    """
    if _non_sum(dst) and src.kind is V:
        return f"reinterpret(x, {axis}, src={src}, dst={dst}) to declare the per-rank values pending"
    two_steps = _two_steps(src, dst, axis)
    if two_steps:
        return two_steps
    step = route(src, dst, axis)
    if step is None and src != dst:
        # V vs S(i): the same local type, only the collective's form differs.
        shard = src.shard if src.shard is not None else dst.shard
        return (
            f"all_to_all(x, {axis}, src=S(i), dst=S(j)) with both as shards, or src=V, "
            f"dst=V (here S({shard}) and V are mixed)"
        )
    if step is None:
        return f"nothing: the input already is {dst.on(axis)}"
    return step.call(axis, expert=row_of(step).gated)


def instead_template(src: AxisType, dst: AxisType, axis: str) -> str | None:
    """:func:`instead` as a rewrite of the value ``{x}`` (``{x}`` alone: nothing to do); None where
    it names a choice (V and S(i) mixed: which form the collective should take)."""
    if _non_sum(dst) and src.kind is V:
        return f"reinterpret({{x}}, {axis}, src={src}, dst={dst})"
    if _through_replicate(src, dst) is not None:
        return _two_step_template(src, dst, axis)
    step = route(src, dst, axis)
    if step is None:
        return None if src != dst else "{x}"
    return step.call(axis, "{x}", expert=row_of(step).gated)


def transition(
    op: str,
    src: AxisType,
    dst: AxisType,
    axis: str,
    expert_mode: bool = False,
) -> AxisType:
    """The result type of ``op(x, axis, src=src, dst=dst)``, or why it is invalid.

    ``op`` is a collective, a cast, or ``redistribute``.  Errors:
    ``spmd-invalid-transition`` for a reinterpret/convert pair that does not
    exist, ``spmd-collective`` for a collective given a src/dst it does not
    take, ``spmd-expert-mode`` for a gated pair without ``expert_mode=True``.
    Each names the operation to call instead.
    """
    if op == "redistribute":
        route(src, dst, axis)  # raises where no one operation keeps the value
        return dst
    if op in CASTS and src == dst:
        return dst
    row = _row_taken(op, src, dst)
    if row is None or not _allowed_forms(op, src, dst):
        template = instead_template(src, dst, axis)
        raise SpmdTypeError(
            Code.INVALID_TRANSITION if op in CASTS else Code.COLLECTIVE,
            axis,
            f"{op}(src={src}, dst={dst}) does not exist on axis {axis}"
            f"{_why_not(op, src, dst)}. Fix: use {instead(src, dst, axis)}.",
            Fix(Target.CALL, template) if template else None,
        )
    if row.gated and not expert_mode:
        raise _gated(op, src, dst, axis, row)
    return dst


def _gated(op: str, src: AxisType, dst: AxisType, axis: str, row: Transition) -> SpmdTypeError:
    """A gated pair without ``expert_mode``: the fix keeps the value where an ungated operation does."""
    expert = f"pass expert_mode=True: {Step(op, src, dst).call(axis, expert=True)}"
    keeping = route(src, dst, axis)
    if keeping is None or keeping.op == op or row_of(keeping).gated:
        fix, rewrite = f"Fix: if that is what you mean, {expert}", None
    else:
        fix = f"Fix: {keeping.call(axis)} keeps the value; if you mean the change, {expert}"
        rewrite = Fix(Target.CALL, keeping.call(axis, "{x}"))
    return SpmdTypeError(
        Code.EXPERT_MODE, axis, f"{op}(src={src}, dst={dst}) on axis {axis} {row.reason.format(axis=axis)}. {fix}.", rewrite
    )


def _row_taken(op: str, src: AxisType, dst: AxisType) -> Transition | None:
    """The row ``op(src, dst)`` runs, or None where the pair does not exist.

    src=V of ``all_reduce``/``reduce_scatter`` means reinterpret(V,P) first
    (docs/spec.md#deviations).  A pending avg/max/min takes only the rows
    marked ``any_reduce``, none of them gated (docs/spec.md#pending-reductions).
    """
    src_kind = P if op in IMPLICIT_PARTIAL and src.kind is V else src.kind
    row = _ROWS.get((op, src_kind, dst.kind))
    if row is not None and (_non_sum(src) or _non_sum(dst)) and not row.any_reduce:
        return None
    return row


def _why_not(op: str, src: AxisType, dst: AxisType) -> str:
    """The reason an invalid pair does not exist (after ``; ``), where one applies ('' otherwise)."""
    if _non_sum(src) or _non_sum(dst):
        pending = src if _non_sum(src) else dst
        return (
            f"; a pending {pending.reduce} is made only by convert from R or reinterpret from V, "
            f"and resolved only by all_reduce or reduce_scatter"
        )
    if op == "reinterpret" and src.kind is P:
        return "; a pending sum can only be resolved by communication"
    if op == "reinterpret" and (src.kind, dst.kind) == (I, P):
        return "; reinterpret(I,P) would scale the value by the axis size"
    if op == "convert" and src.kind is P:
        return "; a pending sum can only be resolved by communication"
    if op in CASTS and src.kind is V and dst.kind in (R, I):
        return "; the ranks hold different data: gathering it is communication"
    if op == "all_to_all":
        return "; all_to_all maps V to V or S(i) to S(j)"
    if op in CASTS and src.kind is V and dst.kind is V:
        return "; changing the shard dim moves data between ranks"
    if op == "reinterpret" and dst.shard is not None:
        return "; a reinterpret never moves data, so it cannot pick a shard dim"
    return ""


def check_source(op: str, declared: AxisType, actual: AxisType, axis: str, dst: AxisType | None = None,
                 expert_mode: bool = False) -> None:
    """The input's actual type must be the declared ``src`` (V and S(i) agree).

    A varying input is also accepted where ``all_reduce``/``reduce_scatter``
    declare ``src=P``: the implicit ``reinterpret(V,P)`` is a valid,
    ungated transition whose forward and backward are the identity, so the
    call computes exactly what ``src=V`` would (docs/spec.md#deviations).
    This is the row-parallel pattern: a local matmul gives V, the reduction
    reads it as P.  Raises ``spmd-collective`` whose fix is a valid call:
    ``src=`` the actual type where ``op`` takes it to ``dst``, else the
    operation that does (an I input to ``all_reduce(src=P, dst=R)`` is
    ``convert(x, tp, src=I, dst=R)``: it is already the sum).
    """
    if actual.local == declared.local:
        return
    if op in IMPLICIT_PARTIAL and declared.kind is P and actual.kind is V:
        return
    fix, template = _source_fix(op, declared, actual, axis, dst, expert_mode)
    raise SpmdTypeError(
        Code.COLLECTIVE,
        axis,
        f"{op} is told src={declared}, but the input is {actual.on(axis)} on axis {axis}. Fix: {fix}.",
        Fix(Target.CALL, template) if template else None,
    )


ROW_COUNTS = ("input_split_sizes", "output_split_sizes")
"""The arguments that make ``all_to_all(V, V)`` uneven: one row count per rank, sent and received."""


def check_row_exchange(src: AxisType, dst: AxisType, axis: str, actual: AxisType | None = None) -> None:
    """``all_to_all`` given :data:`ROW_COUNTS` (a token dispatch) takes V to V from an input that varies.

    Each rank's rows go to their owners and each rank gets the rows meant
    for it: a per-rank value in, a per-rank value out.  S(i) parts are
    pieces of one whole in rank order, which uneven rows scramble; an
    ``actual`` input the same on every rank (R, I) would arrive once from
    each rank, and the parts of a pending reduction (P) would never meet
    again.  Raises ``spmd-collective`` with the fix, a choice: the row
    counts are the caller's.
    """
    uneven = "with input_split_sizes=/output_split_sizes="
    if src != Varying or dst != Varying:
        raise SpmdTypeError(
            Code.COLLECTIVE,
            axis,
            f"all_to_all(src={src}, dst={dst}) {uneven} does not exist on axis {axis}: uneven rows go from each "
            f"rank to their owners, which takes V@{axis} to V@{axis}, while S(i) parts are pieces of one whole "
            f"in rank order. Fix: pass src=V, dst=V, keeping the split sizes.",
        )
    problem = row_exchange_problem(actual, axis) if actual is not None else None
    if actual is None or problem is None:
        return
    why, fix = problem
    raise SpmdTypeError(
        Code.COLLECTIVE,
        axis,
        f"all_to_all {uneven} sends each rank's own rows to their owners, but the input is {actual.on(axis)} on "
        f"axis {axis}: {why}. Fix: {fix}.",
    )


def row_exchange_problem(actual: AxisType, axis: str) -> tuple[str, str] | None:
    """Why an ``actual`` input cannot have its rows exchanged by counts on ``axis``, and the fix (None: it can,
    it varies)."""
    if actual.kind is V:
        return None
    if actual.kind is P:
        return (f"each rank holds a part of a pending {actual.reduce}, and the parts of one row sent to different "
                f"ranks are never reduced",
                f"first reduce_scatter(x, {axis}, src={actual}, dst=S(0)), each rank's share of the reduced rows, "
                f"and count input_split_sizes over that share")
    return (f"every rank of {axis} holds the same rows, so each would send its copy and every row would arrive "
            f"once from each rank (and its gradient be summed as often)",
            f"first convert(x, {axis}, src={actual}, dst=S(0)) to keep this rank's share of the rows, and count "
            f"input_split_sizes over that share; or, if each rank's x holds rows of its own, type it V@{axis} "
            f"where it is made")


def row_exchange_elsewhere(actual: AxisType, other: str, axis: str, counts: AxisType | None) -> AxisType:
    """The type on ``other`` of rows exchanged by counts on ``axis``, the counts ``counts`` on ``other``.

    Counts the same on every rank of ``other`` (R, I) send the same rows from
    each of them: the rows keep ``actual``.  Any other counts (V, a pending
    sum, unknown) may pick other rows on each rank of ``other``, so the
    result is each rank's own, V: from V or S(i) rows, or from R rows (the
    pieces' gradients add up to the replicated value's).  I rows would get a
    gradient that differs per rank where it must be one, and the parts of a
    pending reduction would never meet: ``spmd-collective``, with the fix.
    """
    if counts is not None and counts.kind in (R, I):
        return actual
    if actual.kind in (V, R):
        return Varying
    said = f"the counts are {counts.on(other)}" if counts is not None else "the counts have no known type"
    fix = (f"all_reduce(x, {other}, src={actual}, dst=R)" if actual.kind is P
           else f"convert(x, {other}, src={actual}, dst=R)")
    harm = "unreduced" if actual.kind is P else "with a gradient that differs per rank"
    raise SpmdTypeError(
        Code.COLLECTIVE,
        other,
        f"all_to_all on {axis} with input_split_sizes= may send other rows from each rank of {other}, as {said} "
        f"(only counts R or I on {other} are the same on each of its ranks): the input is {actual.on(other)}, "
        f"which different rows per rank would leave {harm}. Fix: first {fix}, and the result is V@{other}; or "
        f"count the rows from values that are R or I on {other}, passed as `counts.tolist()`.",
    )


def _source_fix(op: str, declared: AxisType, actual: AxisType, axis: str, dst: AxisType | None,
                expert_mode: bool) -> tuple[str, str | None]:
    """The fix of a wrong ``src=``, and the call that replaces ``op``'s (None without a ``dst``)."""
    first = f"first {instead(actual, declared, axis)}"
    if dst is None or _exists(op, actual, dst, axis):
        template = Step(op, actual, dst).call(axis, "{x}", expert_mode) if dst is not None else None
        return f"pass src={actual}, or {first}", template
    try:
        step = route(actual, dst, axis)
    except SpmdTypeError:
        into = instead_template(actual, declared, axis)
        then = Step(op, declared, dst).call(axis, into, expert_mode) if into else None
        return first, then
    if step is None:
        return (f"drop the {op}: the input already is {dst.on(axis)} (if each rank's x is only a part, "
                f"its type is wrong where x is made)"), "{x}"
    call = step.call(axis, expert=row_of(step).gated)
    return f"{call} takes the {actual.on(axis)} input to {dst.on(axis)}", step.call(axis, "{x}", row_of(step).gated)


def _exists(op: str, src: AxisType, dst: AxisType, axis: str) -> bool:
    """Whether ``op(src, dst)`` is a valid call without ``expert_mode``."""
    try:
        transition(op, src, dst, axis)
    except SpmdTypeError:
        return False
    return True


def backward_of(op: str, src: AxisType, dst: AxisType) -> Step:
    """The operation autograd runs for ``op(src, dst)``'s gradient.

    ``src``/``dst`` must be a valid pair of :func:`transition` with the
    implicit ``reinterpret(V,P)`` of ``all_reduce``/``reduce_scatter``
    already applied.  A returned ``all_reduce(V, I)`` (the backward of
    ``reinterpret(I,V)``) means that same implicit form.

    A cast to the type it already has is its own backward.  The casts that
    make a pending avg/max/min (``convert(R, Pop)``, ``reinterpret(V, Pop)``)
    keep every rank's value, and a pending avg/max/min's gradient is already
    each rank's share of the reduced value's gradient, so their backward is a
    ``reinterpret`` (the identity).  The collectives that resolve a pending
    max/min (src ``Pmax``/``Pmin``) are not single table cells backwards: the
    runtime runs the backward of the same collective from ``P`` and splits the
    result among the ranks attaining the extremum.

    >>> from spmd_stubs.core import Invariant, PartialOf, Replicate
    >>> str(backward_of("all_gather", Varying, Replicate))
    'reduce_scatter(P,V)'
    >>> str(backward_of("reinterpret", Invariant, Replicate))
    'all_reduce(P,I)'
    >>> str(backward_of("convert", Replicate, PartialOf("max")))
    'reinterpret(V,P)'
    """
    if op in CASTS and (src == dst or _non_sum(dst)):
        return Step("reinterpret" if _non_sum(dst) else op, dual(dst), dual(src))
    return Step(row_of(Step(op, src, dst)).backward, dual(dst), dual(src))


def transitions() -> list[tuple[str, Kind, Kind, bool]]:
    """Every valid (op, src kind, dst kind, needs expert_mode) of :data:`TRANSITIONS`, in its order."""
    return [(row.op, row.src, row.dst, row.gated) for row in TRANSITIONS]
