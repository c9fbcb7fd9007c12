"""Readings: one answer for every ndim the op allows (docs/spec.md#global-spmd).

Types carry no shapes, so ``S(0)`` and ``S(-1)`` may be the same dim.  An
op whose behaviour depends on the ndim is judged under every ndim it allows
(a *reading*); it is accepted only when all readings agree, and is otherwise
an error asking for dims written consistently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence, Union

from spmd_stubs.core.axis_types import AxisType, Operand, Shard
from spmd_stubs.core.errors import Code, SpmdTypeError
from spmd_stubs.core.sharding.errors import Loud, first_shard, gather_fix, mismatch
from spmd_stubs.core.sharding.specs import shown, spec_text

_MAX_EXTRA_DIMS = 4


def readings_bound(*dims: int) -> int:
    """One past the largest ndim tried: enough for every dim named, and a few more."""
    return 2 * (max((abs(d) for d in dims), default=0) + 2) + _MAX_EXTRA_DIMS


def ndims(*dims: int, minimum: int = 1) -> range:
    return range(minimum, readings_bound(*dims))


def fewest(dims: Sequence[int]) -> int:
    """The fewest dims a tensor has where every one of ``dims`` exists (at least 1)."""
    return max([1, *(k + 1 for k in dims), *(-k for k in dims)])


@dataclass(frozen=True)
class Pos:
    """A reading's answer: the sharded dim lands at ``position`` of an ``ndim``-dim result.

    ``like``: the sign the answer is written with when both countings are
    stable across readings (-1: from the back).
    """

    position: int
    ndim: int
    order: int | None
    like: int


Outcome = Union[AxisType, Pos]


class Invalid(Exception):
    """The op's dims do not exist for this ndim: not a reading."""


def normal(dim: int, ndim: int) -> int | None:
    """``dim`` as a non-negative index into ``ndim`` dims, None when out of range."""
    if -ndim <= dim < ndim:
        return dim % ndim
    return None


def norm_or_invalid(dim: int, n: int) -> int:
    normalised = normal(dim, n)
    if normalised is None:
        raise Invalid(dim)
    return normalised


def agree(outcomes: Iterable[Callable[[], Outcome]], ambiguous: Callable[[], SpmdTypeError]) -> AxisType:
    """Run every reading; all that are not loud must give the same type (or the same error).

    A shard's position may be stable counted from the front, from the back,
    or both (then it is written the way the input's shard was).
    """
    results: list[Outcome] = []
    errors: list[SpmdTypeError] = []
    loud: list[SpmdTypeError] = []
    for outcome in outcomes:
        try:
            results.append(outcome())
        except Invalid:
            continue
        except Loud as dropped:
            loud.append(dropped.error)
        except SpmdTypeError as error:
            errors.append(error)
    if not results and not errors:
        raise loud[0] if loud else ambiguous()
    if results and errors:
        raise ambiguous()
    if errors:
        if len({e.message for e in errors}) == 1:
            raise errors[-1]
        raise ambiguous()
    return _one_answer(results, ambiguous)


def _one_answer(results: Sequence[Outcome], ambiguous: Callable[[], SpmdTypeError]) -> AxisType:
    """The type every reading gives, or the shard position stable from the front or the back."""
    types = {r for r in results if isinstance(r, AxisType)}
    positions = [r for r in results if isinstance(r, Pos)]
    if types and positions or len(types) > 1:
        raise ambiguous()
    if types:
        return types.pop()
    orders = {p.order for p in positions}
    front = {p.position for p in positions}
    back = {p.position - p.ndim for p in positions}
    if len(orders) > 1 or (len(front) > 1 and len(back) > 1):
        raise ambiguous()
    order = orders.pop()
    if len(back) == 1 and (positions[0].like < 0 or len(front) > 1):
        return Shard(back.pop(), order)
    return Shard(front.pop(), order)


def ambiguity(op: str, axis: str, operands: Sequence[Operand], dims: str) -> Callable[[], SpmdTypeError]:
    shard = first_shard(operands)

    def error() -> SpmdTypeError:
        return SpmdTypeError(
            Code.SHARD_MISMATCH,
            axis,
            f"{op} with {dims} on {shown(operands, axis)}: without the tensor's ndim the checker cannot tell "
            f"whether the sharded dim {shard.shard} is one of the dims the op acts on (a dim counted from the "
            f"front and one counted from the back may be the same). Fix: write the dims consistently: both "
            f"counted from the front (S({max(shard.shard or 0, 0)})@{axis} with non-negative "
            f"dims) or both from the back (S(-k)@{axis} with negative dims).",
        )

    return error


@dataclass(frozen=True)
class DimMap:
    """What a single-operand op does to each input dim, for one input ndim."""

    ndim_out: int
    positions: dict[int, int] = field(default_factory=dict)  # input dim -> output dim
    reduced: frozenset[int] = frozenset()
    touched: frozenset[int] = frozenset()


Build = Callable[[int], list[DimMap]]
"""An op's dim maps for one input ndim (raises :class:`Invalid` where its dims do not exist)."""


def maps(build: Build) -> Build:
    """``build`` with the ndims its dims do not exist for giving no reading."""

    def safe(n: int) -> list[DimMap]:
        try:
            return build(n)
        except Invalid:
            return []

    return safe


def inserted(dim: int) -> Build:
    """A new dim at ``dim`` (unsqueeze, stack): the input's dims keep their order around it."""

    def build(n: int) -> list[DimMap]:
        k = norm_or_invalid(dim, n + 1)
        return [DimMap(n + 1, {i: (i if i < k else i + 1) for i in range(n)})]

    return build


def unary(
    operands: Sequence[Operand],
    axis: str,
    op: str,
    dim_maps: Build,
    tried: Iterable[int],
    dims_text: str,
    on_reduced: Callable[[], AxisType],
    on_touched: Callable[[], SpmdTypeError],
    like_back: bool = False,
) -> AxisType:
    """A single-operand op (operand 0 the data; other tensors must not be sharded on the axis).

    ``tried`` are the input ndims read; ``like_back``: write a result stable both ways counted from the back.
    """
    data = _sharded_data(operands, axis, op)
    d = data.shard
    assert d is not None

    def reading(dim_map: DimMap, n: int) -> Callable[[], Outcome]:
        def outcome() -> Outcome:
            index = d % n
            if index in dim_map.reduced:
                return on_reduced()
            if index in dim_map.touched or index not in dim_map.positions:
                raise on_touched()
            return Pos(dim_map.positions[index], dim_map.ndim_out, data.order, -1 if like_back else d)

        return outcome

    outcomes = [reading(m, n) for n in tried if normal(d, n) is not None for m in dim_maps(n)]
    return agree(outcomes, ambiguity(op, axis, operands, dims_text))


def _sharded_data(operands: Sequence[Operand], axis: str, op: str) -> AxisType:
    """Operand 0, the only one that may be sharded on the axis."""
    data = operands[0] if operands else None
    for other in operands[1:]:
        if isinstance(other, AxisType) and other.shard is not None:
            raise mismatch(
                op,
                axis,
                operands,
                f"only the data operand may be sharded, but another operand is {spec_text(other, axis)}",
                gather_fix(axis, other, "that operand"),
            )
    if not (isinstance(data, AxisType) and data.shard is not None):
        raise mismatch(op, axis, operands, "an operand that is not the data is sharded", gather_fix(axis, first_shard(operands)))
    return data
