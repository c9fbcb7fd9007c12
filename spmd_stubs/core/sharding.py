"""Shard propagation for global SPMD (seed 000, "Shard propagation").

Pure Python (no torch, no mypy), like :mod:`spmd_stubs.core`: the mypy
plugin asks it, per global mesh axis, what an op's result is.

A *partition spec* says how the ranks' local tensors make up one global
tensor: ``S(i)@tp`` is one piece of the global tensor split on dim ``i`` over
``tp`` (with an ``order`` when several axes split that dim), and ``R``,
``I``, ``P`` are the global value itself (``P`` a pending reduction of it).
An op is *propagated* on an axis ``a`` when some partition spec ``out`` makes
``map(f, in_specs(x)) == out(f(x))`` hold: running the op locally on every
rank computes the op on the global tensors.  Where none exists, the local and
global meanings of the op differ, and the program needs a collective first:
the error names it.

:func:`propagate` answers for one axis.  Its inputs are each operand's type on
that axis (``None`` unknown, :data:`~spmd_stubs.core.SCALAR` a python
number) and the op's *shape behaviour* (:data:`Behaviour`: which dims the op
keeps, moves, reduces or acts along, with the dims of the call filled in).
Local typing runs first on every axis (:func:`spmd_stubs.core.evaluate`);
propagation only refines its V result into a shard ``S(d')`` with the same
order, turns a contraction into ``P`` where the call says
``out_partial_axes=``, or rejects the op.  Errors are
:class:`~spmd_stubs.core.SpmdTypeError` with the codes

* ``spmd-sharded-contraction``: the op contracts or reduces a dim that is
  sharded on the axis and the call does not name the axis in
  ``out_partial_axes`` (or names it where nothing sharded is contracted);
* ``spmd-shard-mismatch``: operands are split differently (or one has no
  partition spec), or the op acts along / reshapes the sharded dim.

**Unknown ndim.**  Types carry no shapes, so ``S(0)`` and ``S(-1)`` may be the
same dim.  Where an op's behaviour depends on the ndim (``sum(dim=-1)`` on
``S(0)``: the same dim when the tensor is 1-D), every ndim the op allows is
tried (a *reading*); the op is accepted only when all readings agree, and is
otherwise an error asking for dims written consistently (both counted from
the front, or both from the back).  So negative dims pass through ops that
keep trailing dims and non-negative ones through ops that keep leading dims.

Two assumptions are made, each documented in ``docs/global.md``:

* **Broadcasting.**  Elementwise operands align from the right.  An operand
  that is not sharded on the axis (R, I, P) is assumed to broadcast along the
  sharded dim (size 1 or missing there) and an operand that *is* sharded is
  assumed to have the result's ndim.  A full-size replicated operand fails
  torch's shape check at runtime (its size differs from the shard's), so that
  mistake is loud, not silent; the one silent case is a replicated operand
  with *more* dims than the sharded one and size 1 where they align: write
  the shard with a negative dim there (``S(-2)``).
* **Matrix transposes.**  ``.T`` and ``.t()`` are read as the 2-D transpose
  (torch deprecates ``.T`` on other ranks).

Readings under which the local program would fail torch's shape check
(a contracted or matched dim split on one operand and whole on another) are
dropped as *loud*: they cannot run silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping, Sequence, Union

from spmd_stubs.core import AxisType, Code, Kind, Operand, PartialOf, Scalar, Shard, SpmdTypeError, TensorType

__all__ = [
    "Operand",
    "Pointwise",
    "Einsum",
    "Matmul",
    "Linear",
    "Attention",
    "Reduce",
    "Along",
    "Transpose",
    "Permute",
    "Movedim",
    "Concat",
    "Stack",
    "Unsqueeze",
    "Squeeze",
    "Flatten",
    "View",
    "Opaque",
    "Behaviour",
    "propagate",
    "effective",
    "normalise_orders",
    "same_spec",
    "spec_mismatch",
]


# --------------------------------------------------------------------------
# Shape behaviours (the dims of the call filled in)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Pointwise:
    """Elementwise over every tensor operand, broadcasting (aligned from the right)."""


@dataclass(frozen=True)
class Einsum:
    """``torch.einsum(equation, *operands)``: the seed's einsum rule."""

    equation: str


@dataclass(frozen=True)
class Matmul:
    """``a @ b`` / ``torch.matmul`` (1-D operands included), or a fixed form.

    ``equations`` None: every form ``matmul`` takes, by the operands' ndims
    (the readings); otherwise the einsum equations of the op (``mm``:
    ``ij,jk->ik``).
    """

    equations: tuple[str, ...] | None = None


MATMUL_FORMS = ("...ij,...jk->...ik", "...ij,j->...i", "j,...jk->...k", "j,j->")


@dataclass(frozen=True)
class Linear:
    """``F.linear(x, weight, bias)`` = ``x @ weight.T + bias`` (weight 2-D, or 1-D)."""


@dataclass(frozen=True)
class Attention:
    """``scaled_dot_product_attention(q, k, v, attn_mask)``: ``...le,...se,...sv(,...ls)->...lv``.

    Softmax runs over the key dim ``s``: no contracted dim may be split.
    """


@dataclass(frozen=True)
class Reduce:
    """A reduction over ``dims`` (None: every dim), keeping them as size 1 when ``keepdim``.

    ``partial`` is the pending reduction a sharded reduced dim leaves when
    the call names the axis in ``out_partial_axes`` (None: the op cannot).
    """

    dims: tuple[int, ...] | None = None
    keepdim: bool = False
    partial: str | None = None


@dataclass(frozen=True)
class Along:
    """An op that keeps the shape but computes along ``dims`` (softmax, cumsum, sort, flip).

    The sharded dim must not be one of them: along it, each rank would see only
    its piece.  ``trailing`` counts dims from the back instead (layer_norm
    over its ``normalized_shape``).
    """

    dims: tuple[int, ...]


@dataclass(frozen=True)
class Transpose:
    """``transpose(dim0, dim1)`` / ``swapaxes``; ``matrix=True`` for ``.T`` / ``.t()`` (2-D)."""

    dim0: int
    dim1: int
    matrix: bool = False


@dataclass(frozen=True)
class Permute:
    """``permute(dims)``."""

    dims: tuple[int, ...]


@dataclass(frozen=True)
class Movedim:
    """``movedim(source, destination)``."""

    source: tuple[int, ...]
    destination: tuple[int, ...]


@dataclass(frozen=True)
class Concat:
    """``cat(tensors, dim)``: every operand must be split the same way, not on ``dim``."""

    dim: int


@dataclass(frozen=True)
class Stack:
    """``stack(tensors, dim)``: a new dim at ``dim``; operands split the same way."""

    dim: int


@dataclass(frozen=True)
class Unsqueeze:
    dim: int


@dataclass(frozen=True)
class Squeeze:
    """``squeeze(dims)``; None: every size-1 dim (which ones is known only at runtime)."""

    dims: tuple[int, ...] | None


@dataclass(frozen=True)
class Flatten:
    start: int = 0
    end: int = -1


@dataclass(frozen=True)
class View:
    """``view`` / ``reshape`` to ``ndim`` dims (None: unknown), of which the plugin proved

    the first ``prefix`` to be the input's first dims (``x.shape[0]``...) and
    the last ``suffix`` the input's last dims.  ``merged_front``: the first
    output dim is the product of the input's leading dims not in the suffix
    (the output has ``suffix + 1`` dims).
    """

    prefix: int = 0
    suffix: int = 0
    ndim: int | None = None


@dataclass(frozen=True)
class Opaque:
    """An op with no propagation rule: any sharded operand is rejected."""

    why: str = "has no shard propagation rule"


Behaviour = Union[
    Pointwise, Einsum, Matmul, Linear, Attention, Reduce, Along, Transpose, Permute, Movedim, Concat, Stack,
    Unsqueeze, Squeeze, Flatten, View, Opaque,
]


# --------------------------------------------------------------------------
# Specs: effective orders, comparisons
# --------------------------------------------------------------------------


def effective(tensor_type: TensorType, axis: str, global_axes: Iterable[str]) -> AxisType | None:
    """``tensor_type`` on ``axis``, its shard order counted among the *global* axes only.

    With ``dp`` local, ``S(0)@(dp,tp)`` is, on ``tp``, just ``S(0)``: each
    dp-rank's tensor is split by tp alone.
    """
    axis_type = tensor_type.get(axis)
    if axis_type is None or axis_type.shard is None or axis_type.order is None:
        return axis_type
    chosen = set(global_axes) | {axis}
    same = sorted(
        (t.order, name)
        for name, t in tensor_type.axes
        if name in chosen and t.shard == axis_type.shard and t.order is not None
    )
    if len(same) < 2:
        return Shard(axis_type.shard)
    return Shard(axis_type.shard, [name for _, name in same].index(axis))


def normalise_orders(mapping: Mapping[str, AxisType]) -> dict[str, AxisType]:
    """Renumber shard orders per dim among the axes that still shard it (None when alone)."""
    by_dim: dict[int, list[tuple[int, str]]] = {}
    for name, t in mapping.items():
        if t.shard is not None and t.order is not None:
            by_dim.setdefault(t.shard, []).append((t.order, name))
    result = dict(mapping)
    for dim, entries in by_dim.items():
        alone = sum(1 for t in mapping.values() if t.shard == dim) < 2
        for position, (_, name) in enumerate(sorted(entries)):
            result[name] = Shard(dim, None if alone else position)
    return result


def same_spec(a: AxisType, b: AxisType) -> bool:
    """Equal as global types: the same kind, shard dim, order and reduction."""
    return a == b


def spec_text(t: AxisType, axis: str) -> str:
    """``S(0)@tp``; a shard with an order shows it: ``S(0)@tp (order 1)``."""
    text = t.on(axis)
    return f"{text} (order {t.order})" if t.order is not None else text


def spec_mismatch(declared: AxisType, actual: AxisType, axis: str, where: str) -> SpmdTypeError | None:
    """A global boundary (a parameter, a return, a collective's src) given another split.

    V on either side is no partition spec: accepted (the boundary declares it).
    """
    if declared.shard is None or actual.shard is None or same_spec(declared, actual):
        return None
    if declared.shard == actual.shard:
        fix = f"redistribute(x, src=(...{spec_text(actual, axis)}...), dst=(...{spec_text(declared, axis)}...)) to reorder the axes"
    else:
        fix = f"all_to_all(x, {axis}, src={actual}, dst={declared})"
    return SpmdTypeError(
        Code.SHARD_MISMATCH,
        axis,
        f"{where} is declared {spec_text(declared, axis)} but gets {spec_text(actual, axis)} on global axis "
        f"{axis}: the pieces make up a different global tensor. Fix: {fix}.",
    )


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


def _shown(operands: Sequence[Operand], axis: str) -> str:
    parts = []
    for o in operands:
        if isinstance(o, AxisType):
            parts.append(spec_text(o, axis))
        elif isinstance(o, Scalar):
            parts.append("scalar")
    return ", ".join(parts)


def _mismatch(op: str, axis: str, operands: Sequence[Operand], why: str, fix: str) -> SpmdTypeError:
    return SpmdTypeError(
        Code.SHARD_MISMATCH,
        axis,
        f"{op} on global axis {axis} ({_shown(operands, axis)}): {why}. Fix: {fix}.",
    )


def _gather_fix(axis: str, shard: AxisType, tensor: str = "x") -> str:
    return f"all_gather({tensor}, {axis}, src={shard}, dst=R) first, or run it in a @local_map({axis}) def"


class _Loud(Exception):
    """This reading fails torch's shape check at runtime: drop it."""

    def __init__(self, error: SpmdTypeError) -> None:
        super().__init__(error.message)
        self.error = error


# --------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------


def propagate(
    behaviour: Behaviour,
    operands: Sequence[Operand],
    axis: str,
    op: str,
    local: AxisType | None,
    partial: str | None = None,
) -> AxisType | None:
    """The global type on ``axis`` of ``op``'s result; raises :class:`SpmdTypeError`.

    ``operands`` are the op's operands on ``axis`` in the order its behaviour
    names them (data first; einsum's and cat's tensors in order), with
    :func:`effective` orders.  ``local`` is the local rules' result on the
    axis.  ``partial`` is the reduction ``out_partial_axes`` asks for on this
    axis (``"sum"``, ``"max"``, ``"min"``), None when the call does not name it.
    """
    for operand in operands:
        if isinstance(operand, AxisType) and operand.kind is Kind.V and operand.shard is None:
            raise SpmdTypeError(
                Code.SHARD_MISMATCH,
                axis,
                f"{op} gets a V@{axis} operand ({_shown(operands, axis)}) on global axis {axis}: a "
                f"varying tensor without a partition spec has no global meaning. Fix: annotate how "
                f"its pieces make up the global tensor (S(i)@{axis}), or run this code in a "
                f"@local_map({axis}) def.",
            )
    sharded = [o for o in operands if isinstance(o, AxisType) and o.shard is not None]
    if not sharded:
        if partial is not None:
            raise _needless_partial(op, axis, operands)
        return local
    rule = _RULES[type(behaviour)]
    result = rule(behaviour, operands, axis, op, partial)
    if result.kind is Kind.P and partial is None:  # pragma: no cover -- rules raise first
        raise AssertionError("a partial result without out_partial_axes")
    return result


def _needless_partial(op: str, axis: str, operands: Sequence[Operand]) -> SpmdTypeError:
    return SpmdTypeError(
        Code.SHARDED_CONTRACTION,
        axis,
        f"{op} names {axis} in out_partial_axes, but no dim it contracts or reduces is sharded on global "
        f"axis {axis} ({_shown(operands, axis)}): the result is already the global value on every rank. "
        f"Fix: drop {axis} from out_partial_axes.",
    )


def _contraction(
    op: str, axis: str, operands: Sequence[Operand], partial: str | None, what: str, allowed: str | None
) -> AxisType:
    """A sharded dim contracted or reduced: P[partial] when asked for, else the error."""
    if partial is not None and allowed is not None:
        if partial != allowed:
            raise SpmdTypeError(
                Code.SHARDED_CONTRACTION,
                axis,
                f"{op} over a dim sharded on global axis {axis} ({_shown(operands, axis)}) leaves a pending "
                f"{allowed}, not a pending {partial}. Fix: use the op whose reduction is a {partial} "
                f"(spmd.sum for P, spmd.amax for Pmax, spmd.amin for Pmin).",
            )
        return PartialOf(allowed)
    if allowed is None:
        fix = _reduce_fixes(op, axis, operands)
    else:
        fix = (
            f"name the axis, {_partial_call(op)}(..., out_partial_axes={axis}), to get the pending "
            f"{'sum' if allowed == 'sum' else allowed} P{'' if allowed == 'sum' else allowed}@{axis} and reduce it "
            f"later (all_reduce(y, {axis}, src=P{'' if allowed == 'sum' else allowed}, dst=R)); or "
            f"{_gather_fix(axis, _first_shard(operands))}"
        )
    return _raise(
        SpmdTypeError(
            Code.SHARDED_CONTRACTION,
            axis,
            f"{op} {what} a dim sharded on global axis {axis} ({_shown(operands, axis)}): each rank "
            f"computes only its part of the result, which global SPMD never turns into a Partial implicitly. "
            f"Fix: {fix}.",
        )
    )


_SPMD_OPS = {"einsum": "spmd.einsum", "matmul": "spmd.matmul", "mm": "spmd.matmul", "bmm": "spmd.matmul",
             "linear": "spmd.linear", "sum": "spmd.sum", "nansum": "spmd.sum", "amax": "spmd.amax",
             "max": "spmd.amax", "amin": "spmd.amin", "min": "spmd.amin"}


def _partial_call(op: str) -> str:
    return _SPMD_OPS.get(op, "spmd.einsum")


def _reduce_fixes(op: str, axis: str, operands: Sequence[Operand]) -> str:
    shard = _first_shard(operands)
    if op == "mean":
        return (
            f"spmd.sum(x, dim, out_partial_axes={axis}) divided by the global size (a pending sum), or "
            f"{_gather_fix(axis, shard)}"
        )
    if op in _SPMD_OPS:
        return f"{_SPMD_OPS[op]}(..., out_partial_axes={axis}), or {_gather_fix(axis, shard)}"
    return _gather_fix(axis, shard)


def _first_shard(operands: Sequence[Operand]) -> AxisType:
    return next(o for o in operands if isinstance(o, AxisType) and o.shard is not None)


def _raise(error: SpmdTypeError) -> AxisType:
    raise error


# --------------------------------------------------------------------------
# Readings: one answer for every ndim the op allows
# --------------------------------------------------------------------------

_MAX_EXTRA_DIMS = 4


def _readings_bound(*dims: int) -> int:
    return 2 * (max((abs(d) for d in dims), default=0) + 2) + _MAX_EXTRA_DIMS


@dataclass(frozen=True)
class _Pos:
    """A reading's answer: the sharded dim lands at ``position`` of an ``ndim``-dim result.

    ``like``: the sign the answer is written with when both countings are
    stable across readings (-1: from the back).
    """

    position: int
    ndim: int
    order: int | None
    like: int


Outcome = Union[AxisType, _Pos]


def _agree(outcomes: Iterable[Callable[[], Outcome]], ambiguous: Callable[[], SpmdTypeError]) -> AxisType:
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
        except _Invalid:
            continue
        except _Loud as dropped:
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
    types = {r for r in results if isinstance(r, AxisType)}
    positions = [r for r in results if isinstance(r, _Pos)]
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


def _normal(dim: int, ndim: int) -> int | None:
    """``dim`` as a non-negative index into ``ndim`` dims, None when out of range."""
    if -ndim <= dim < ndim:
        return dim % ndim
    return None


def _ambiguity(op: str, axis: str, operands: Sequence[Operand], dims: str) -> Callable[[], SpmdTypeError]:
    shard = _first_shard(operands)

    def error() -> SpmdTypeError:
        return SpmdTypeError(
            Code.SHARD_MISMATCH,
            axis,
            f"{op} with {dims} on {_shown(operands, axis)}: without the tensor's ndim the checker cannot tell "
            f"whether the sharded dim {shard.shard} is one of the dims the op acts on (a dim counted from the "
            f"front and one counted from the back may be the same). Fix: write the dims consistently: both "
            f"counted from the front (S({max(shard.shard or 0, 0)})@{axis} with non-negative "
            f"dims) or both from the back (S(-k)@{axis} with negative dims).",
        )

    return error


# Outcome of one input dim under one reading of a single-operand op.
_KEPT, _REDUCED, _TOUCHED = "kept", "reduced", "touched"


@dataclass(frozen=True)
class _DimMap:
    """What a single-operand op does to each input dim, for one input ndim."""

    ndim_out: int
    positions: dict[int, int] = field(default_factory=dict)  # input dim -> output dim
    reduced: frozenset[int] = frozenset()
    touched: frozenset[int] = frozenset()


def _unary(
    operands: Sequence[Operand],
    axis: str,
    op: str,
    maps: Callable[[int], list[_DimMap]],
    ndims: Iterable[int],
    dims_text: str,
    on_reduced: Callable[[], AxisType],
    on_touched: Callable[[], SpmdTypeError],
    like_back: bool = False,
) -> AxisType:
    """A single-operand op (operand 0 the data; other tensors must not be sharded on the axis).

    ``like_back``: write a result stable both ways counted from the back.
    """
    data = operands[0] if operands else None
    for other in operands[1:]:
        if isinstance(other, AxisType) and other.shard is not None:
            raise _mismatch(
                op,
                axis,
                operands,
                f"only the data operand may be sharded, but another operand is {spec_text(other, axis)}",
                _gather_fix(axis, other, "that operand"),
            )
    if not (isinstance(data, AxisType) and data.shard is not None):
        raise _mismatch(op, axis, operands, "an operand that is not the data is sharded", _gather_fix(axis, _first_shard(operands)))
    d = data.shard

    def reading(dim_map: _DimMap, n: int) -> Callable[[], Outcome]:
        def outcome() -> Outcome:
            index = d % n
            if index in dim_map.reduced:
                return on_reduced()
            if index in dim_map.touched or index not in dim_map.positions:
                raise on_touched()
            return _Pos(dim_map.positions[index], dim_map.ndim_out, data.order, -1 if like_back else d)

        return outcome

    outcomes = [reading(m, n) for n in ndims if _normal(d, n) is not None for m in maps(n)]
    return _agree(outcomes, _ambiguity(op, axis, operands, dims_text))


def _ndims(*dims: int, minimum: int = 1) -> range:
    return range(minimum, _readings_bound(*dims))


class _Invalid(Exception):
    """The op's dims do not exist for this ndim: not a reading."""


def _maps(build: Callable[[int], list[_DimMap]]) -> Callable[[int], list[_DimMap]]:
    def safe(n: int) -> list[_DimMap]:
        try:
            return build(n)
        except _Invalid:
            return []

    return safe


def _norm_or_invalid(dim: int, n: int) -> int:
    normal = _normal(dim, n)
    if normal is None:
        raise _Invalid(dim)
    return normal


# --------------------------------------------------------------------------
# Rules per behaviour
# --------------------------------------------------------------------------


def _pointwise(b: Pointwise, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
    if partial is not None:
        raise _needless_partial(op, axis, operands)
    sharded = [o for o in operands if isinstance(o, AxisType) and o.shard is not None]
    return _one_split(sharded, operands, axis, op)


def _one_split(sharded: Sequence[AxisType], operands: Sequence[Operand], axis: str, op: str) -> AxisType:
    """The split the sharded operands share; differently split operands are an error."""
    first = sharded[0]
    for other in sharded[1:]:
        if other == first:
            continue
        if other.shard == first.shard:
            raise _mismatch(
                op,
                axis,
                operands,
                f"the operands split dim {first.shard} over the axes in a different order, so equal "
                f"local positions hold different global elements",
                "redistribute one operand to the other's partition spec, e.g. "
                f"redistribute(y, src=(S({first.shard})@(...),), dst=(S({first.shard})@(...),)) with the order of the other",
            )
        if (first.shard >= 0) != (other.shard >= 0):  # type: ignore[operator]
            raise SpmdTypeError(
                Code.SHARD_MISMATCH,
                axis,
                f"{op} on global axis {axis} ({_shown(operands, axis)}): the operands are split on "
                f"S({first.shard}) and S({other.shard}), which are the same dim for some ndims and "
                f"not for others. Fix: write the shard dims consistently (both counted from the front, or "
                f"both from the back), or all_to_all(y, {axis}, src={other}, dst={first}) if they differ.",
            )
        raise _mismatch(
            op,
            axis,
            operands,
            f"the operands are split on different dims (S({first.shard}) and S({other.shard})), so "
            f"each rank holds pieces of different global elements",
            f"all_to_all(y, {axis}, src={other}, dst={first}) on the S({other.shard}) operand",
        )
    return first


def _concat(b: Concat, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
    if partial is not None:
        raise _needless_partial(op, axis, operands)
    tensors = [o for o in operands if isinstance(o, AxisType)]
    sharded = [o for o in tensors if o.shard is not None]
    if len(sharded) != len(tensors):
        whole = next(o for o in tensors if o.shard is None)
        raise _mismatch(
            op,
            axis,
            operands,
            f"it joins pieces split on S({sharded[0].shard}) with a whole tensor ({whole.on(axis)}), "
            "whose sizes differ on every rank",
            f"convert(y, {axis}, src={whole}, dst={sharded[0]}) on the whole operand"
            if whole.kind in (Kind.R, Kind.I)
            else _gather_fix(axis, sharded[0]),
        )
    first = _one_split(sharded, operands, axis, op)
    d = first.shard
    assert d is not None
    if isinstance(b, Concat):

        def build(n: int) -> list[_DimMap]:
            k = _norm_or_invalid(b.dim, n)
            return [_DimMap(n, {i: i for i in range(n) if i != k}, touched=frozenset({k}))]

        dims_text = f"dim={b.dim}"
    else:

        def build(n: int) -> list[_DimMap]:
            k = _norm_or_invalid(b.dim, n + 1)
            return [_DimMap(n + 1, {i: (i if i < k else i + 1) for i in range(n)})]

        dims_text = f"dim={b.dim}"

    def touched() -> SpmdTypeError:
        return _mismatch(
            op,
            axis,
            operands,
            f"it joins along the sharded dim {d}: each rank would put its own pieces side by side, "
            "not the global tensors",
            f"{_gather_fix(axis, first)}; or join along another dim",
        )

    return _unary(
        [first],
        axis,
        op,
        _maps(build),
        _ndims(b.dim, d),
        dims_text,
        lambda: _raise(touched()),
        touched,
    )


def _reduce(b: Reduce, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
    shard = _first_shard(operands)
    contracted: list[bool] = []

    def on_reduced() -> AxisType:
        contracted.append(True)
        return _contraction(op, axis, operands, partial, "reduces over", b.partial)

    def build(n: int) -> list[_DimMap]:
        if b.dims is None:
            reduced = set(range(n))
        else:
            reduced = {_norm_or_invalid(k, n) for k in b.dims}
        if b.keepdim:
            return [_DimMap(n, {i: i for i in range(n) if i not in reduced}, reduced=frozenset(reduced))]
        kept = [i for i in range(n) if i not in reduced]
        return [_DimMap(len(kept), {i: p for p, i in enumerate(kept)}, reduced=frozenset(reduced))]

    dims = b.dims or ()
    result = _unary(
        operands,
        axis,
        op,
        _maps(build),
        _ndims(*dims, shard.shard or 0, minimum=max([1, *(k + 1 for k in dims), *(-k for k in dims)])),
        "every dim" if b.dims is None else f"dim={_dims_text(b.dims)}",
        on_reduced,
        lambda: _mismatch(op, axis, operands, "internal: a reduced dim vanished", "report it"),
    )
    if partial is not None and result.kind is not Kind.P:
        raise _needless_partial(op, axis, operands)
    return result


def _dims_text(dims: Sequence[int]) -> str:
    return str(dims[0]) if len(dims) == 1 else f"({', '.join(map(str, dims))})"


def _along(b: Along, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
    if partial is not None:
        raise _needless_partial(op, axis, operands)
    shard = _first_shard(operands)

    def build(n: int) -> list[_DimMap]:
        acted = {_norm_or_invalid(k, n) for k in b.dims}
        return [_DimMap(n, {i: i for i in range(n) if i not in acted}, touched=frozenset(acted))]

    def touched() -> SpmdTypeError:
        return _mismatch(
            op,
            axis,
            operands,
            f"it computes along dim {_dims_text(b.dims)}, which is the sharded dim {shard.shard}: each rank "
            "sees only its piece of that dim, so the local result is not the global one",
            _gather_fix(axis, shard),
        )

    return _unary(
        operands,
        axis,
        op,
        _maps(build),
        _ndims(*b.dims, shard.shard or 0, minimum=max([1, *(k + 1 for k in b.dims), *(-k for k in b.dims)])),
        f"dim={_dims_text(b.dims)}",
        lambda: _raise(touched()),
        touched,
    )


def _moving(
    operands: Sequence[Operand], axis: str, op: str, partial: str | None, build: Callable[[int], list[_DimMap]],
    dims: Sequence[int], dims_text: str, minimum: int = 1, maximum: int | None = None, like_back: bool = False,
) -> AxisType:
    """Ops that only move dims around (transpose, permute, movedim, unsqueeze, squeeze, flatten)."""
    if partial is not None:
        raise _needless_partial(op, axis, operands)
    shard = _first_shard(operands)

    def touched() -> SpmdTypeError:
        return _mismatch(
            op,
            axis,
            operands,
            f"it merges or removes the sharded dim {shard.shard} in a way whose pieces are not "
            "contiguous pieces of the global result",
            _gather_fix(axis, shard),
        )

    ndims = _ndims(*dims, shard.shard or 0, minimum=minimum)
    if maximum is not None:
        ndims = range(minimum, maximum + 1)
    return _unary(operands, axis, op, _maps(build), ndims, dims_text, lambda: _raise(touched()), touched, like_back)


def _transpose(b: Transpose, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
    def build(n: int) -> list[_DimMap]:
        i, j = _norm_or_invalid(b.dim0, n), _norm_or_invalid(b.dim1, n)
        order = list(range(n))
        order[i], order[j] = order[j], order[i]
        return [_DimMap(n, {src: dst for dst, src in enumerate(order)})]

    if b.matrix:
        # The result of .T is mostly a matmul operand, whose dims count from the back.
        return _moving(operands, axis, op, partial, build, (0, 1), "a matrix transpose", minimum=2, maximum=2, like_back=True)
    return _moving(operands, axis, op, partial, build, (b.dim0, b.dim1), f"dims ({b.dim0}, {b.dim1})",
                   minimum=max(b.dim0 + 1, b.dim1 + 1, -b.dim0, -b.dim1, 1))


def _permute(b: Permute, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
    def build(n: int) -> list[_DimMap]:
        if len(b.dims) != n:
            raise _Invalid(n)
        order = [_norm_or_invalid(k, n) for k in b.dims]
        return [_DimMap(n, {src: dst for dst, src in enumerate(order)})]

    n = len(b.dims)
    return _moving(operands, axis, op, partial, build, b.dims, f"dims {tuple(b.dims)}", minimum=n, maximum=n)


def _movedim(b: Movedim, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
    def build(n: int) -> list[_DimMap]:
        src = [_norm_or_invalid(k, n) for k in b.source]
        dst = [_norm_or_invalid(k, n) for k in b.destination]
        if len(src) != len(dst):
            raise _Invalid(n)
        order: list[int | None] = [None] * n
        for s, t in zip(src, dst):
            order[t] = s
        rest = iter(i for i in range(n) if i not in src)
        filled = [next(rest) if o is None else o for o in order]
        return [_DimMap(n, {s: t for t, s in enumerate(filled)})]

    dims = (*b.source, *b.destination)
    return _moving(operands, axis, op, partial, build, dims, f"source={tuple(b.source)}, destination={tuple(b.destination)}",
                   minimum=max([1, *(k + 1 for k in dims), *(-k for k in dims)]))


def _unsqueeze(b: Unsqueeze, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
    def build(n: int) -> list[_DimMap]:
        k = _norm_or_invalid(b.dim, n + 1)
        return [_DimMap(n + 1, {i: (i if i < k else i + 1) for i in range(n)})]

    return _moving(operands, axis, op, partial, build, (b.dim,), f"dim={b.dim}", minimum=max(1, b.dim, -b.dim - 1))


def _squeeze(b: Squeeze, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
    shard = _first_shard(operands)
    if b.dims is None:
        raise _mismatch(
            op,
            axis,
            operands,
            "squeeze() removes every size-1 dim, and which dims those are is known only at runtime",
            "pass the dim to squeeze (squeeze(dim)), with the same counting as the shard dim",
        )
    squeezed = b.dims

    def build(n: int) -> list[_DimMap]:
        named = sorted({_norm_or_invalid(k, n) for k in squeezed})
        maps = []
        # Each named dim is removed only if its size is 1: both readings.
        for mask in range(1 << len(named)):
            removed = {k for bit, k in enumerate(named) if mask >> bit & 1}
            kept = [i for i in range(n) if i not in removed]
            maps.append(_DimMap(len(kept), {i: p for p, i in enumerate(kept)}, touched=frozenset(named)))
        return maps

    return _moving(operands, axis, op, partial, build, squeezed, f"dim={_dims_text(squeezed)}",
                   minimum=max([1, *(k + 1 for k in squeezed), *(-k for k in squeezed)]))


def _flatten(b: Flatten, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
    def build(n: int) -> list[_DimMap]:
        s, e = _norm_or_invalid(b.start, n), _norm_or_invalid(b.end, n)
        if s > e:
            raise _Invalid(n)
        positions = {i: (i if i <= s else i - (e - s)) for i in range(n) if not s < i <= e}
        return [_DimMap(n - (e - s), positions, touched=frozenset(range(s + 1, e + 1)))]

    return _moving(operands, axis, op, partial, build, (b.start, b.end), f"start_dim={b.start}, end_dim={b.end}",
                   minimum=max(1, b.start + 1, b.end + 1, -b.start, -b.end))


def _view(b: View, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
    if partial is not None:
        raise _needless_partial(op, axis, operands)
    shard = _first_shard(operands)
    d = shard.shard
    assert d is not None
    if d >= 0 and d < b.prefix:
        return shard
    if d < 0 and -d <= b.suffix:
        return shard
    if d == 0 and b.ndim is not None and b.ndim == b.suffix + 1:
        # The leading dims (the sharded one first) merge into the first: each rank's
        # rows are a contiguous block of the merged dim.
        return shard
    raise _mismatch(
        op,
        axis,
        operands,
        f"the checker cannot show that the new shape keeps the sharded dim {d} (it proves only dims "
        f"written as x.shape[i] / x.size(i) at the same place, from the front for S(i), from the back "
        f"for S(-i))",
        f"write the kept dims as x.shape[...] in the new shape, or {_gather_fix(axis, shard)}",
    )


def _opaque(b: Opaque, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
    shard = _first_shard(operands)
    raise _mismatch(op, axis, operands, f"{op} {b.why} in global SPMD", _gather_fix(axis, shard))


# --------------------------------------------------------------------------
# Einsum and the matmul family
# --------------------------------------------------------------------------

_LABEL = re.compile(r"\.\.\.|[A-Za-z]")


@dataclass(frozen=True)
class _Term:
    labels: tuple[str, ...]
    """The labels in order; ``"..."`` once at most."""

    @property
    def ellipsis(self) -> bool:
        return "..." in self.labels

    def expanded(self, length: int, out_length: int) -> list[str]:
        """The labels with the ellipsis as ``length`` broadcast labels, right-aligned to ``out_length``."""
        result: list[str] = []
        for label in self.labels:
            if label == "...":
                result.extend(f"...{out_length - length + k}" for k in range(length))
            else:
                result.append(label)
        return result


def _parse_equation(equation: str, count: int) -> tuple[list[_Term], _Term]:
    text = equation.replace(" ", "")
    left, arrow, right = text.partition("->")
    terms = [_Term(tuple(_LABEL.findall(part))) for part in left.split(",")]
    for part, term in zip(left.split(","), terms):
        if "".join(term.labels) != part or term.labels.count("...") > 1:
            raise ValueError(f"cannot read the einsum term {part!r}")
    if len(terms) != count:
        raise ValueError(f"the equation {equation!r} has {len(terms)} operands, the call {count}")
    if arrow:
        out = _Term(tuple(_LABEL.findall(right)))
        if "".join(out.labels) != right:
            raise ValueError(f"cannot read the einsum output {right!r}")
    else:
        labels = [label for term in terms for label in term.labels if label != "..."]
        once = sorted(label for label in set(labels) if labels.count(label) == 1)
        ellipsis = ("...",) if any(t.ellipsis for t in terms) else ()
        out = _Term((*ellipsis, *once))
    return terms, out


def _einsum_reading(
    terms: Sequence[_Term],
    out: _Term,
    lengths: Sequence[int],
    operands: Sequence[Operand],
    axis: str,
    op: str,
    partial: str | None,
    allowed: str | None,
) -> Outcome:
    """The einsum rule for one reading (the ellipsis lengths fixed)."""
    out_length = max([length for term, length in zip(terms, lengths) if term.ellipsis], default=0)
    expanded = [term.expanded(length, out_length) for term, length in zip(terms, lengths)]
    out_labels = out.expanded(out_length, out_length)
    labelled: list[tuple[int, str, AxisType]] = []
    for index, (labels, operand) in enumerate(zip(expanded, operands)):
        if isinstance(operand, AxisType) and operand.shard is not None:
            position = _normal(operand.shard, len(labels))
            if position is None:
                raise _Invalid(index)
            if terms[index].ellipsis and lengths[index] != out_length:
                raise _Invalid(index)  # a sharded operand is assumed to have the result's batch dims
            labelled.append((index, labels[position], operand))
    names = sorted({label for _, label, _ in labelled})
    if len(names) > 1:
        raise _Loud(
            _mismatch(
                op,
                axis,
                operands,
                f"the axis splits different dims of the operands ({', '.join(_label_text(n) for n in names)}), "
                "so the result would be split twice on it, or mixed",
                f"all_to_all(y, {axis}, src=..., dst=...) so the operands split the same dim, or "
                f"{_gather_fix(axis, labelled[-1][2], 'one operand')}",
            )
        )
    label = names[0]
    first = labelled[0][2]
    for _, _, other in labelled[1:]:
        if other.order != first.order:
            raise _Loud(
                _mismatch(
                    op,
                    axis,
                    operands,
                    "the operands split the shared dim over the axes in a different order",
                    "redistribute one operand to the other's partition spec",
                )
            )
    split = {index for index, _, _ in labelled}
    for index, labels in enumerate(expanded):
        if label in labels and index not in split and not label.startswith("..."):
            operand = operands[index]
            raise _Loud(
                _mismatch(
                    op,
                    axis,
                    operands,
                    f"dim {_label_text(label)} is split on one operand and whole on another "
                    f"({_shown([operand], axis) or 'unknown'}), so the local sizes differ",
                    f"convert(w, {axis}, src={operand.kind.value if isinstance(operand, AxisType) else 'R'}, "
                    f"dst={first}) on the whole operand (if it is replicated), or "
                    f"{_gather_fix(axis, first, 'the split one')}",
                )
            )
    if label in out_labels:
        if partial is not None:
            raise _needless_partial(op, axis, operands)
        shard = first.shard
        assert shard is not None
        return _Pos(out_labels.index(label), len(out_labels), first.order, shard)
    return _contraction(op, axis, operands, partial, "contracts over", allowed)


def _label_text(label: str) -> str:
    return "a batch dim" if label.startswith("...") else repr(label)


def _einsum_rule(
    equations: Sequence[str], operands: Sequence[Operand], axis: str, op: str, partial: str | None,
    allowed: str | None = "sum",
) -> AxisType:
    readings: list[Callable[[], Outcome]] = []
    bound = _readings_bound(*(o.shard for o in operands if isinstance(o, AxisType) and o.shard is not None))
    for equation in equations:
        terms, out = _parse_equation(equation, len(operands))
        choices = [range(bound) if term.ellipsis else range(1) for term in terms]
        for lengths in _product(choices):

            def outcome(terms: list[_Term] = terms, out: _Term = out, lengths: tuple[int, ...] = lengths) -> Outcome:
                return _einsum_reading(terms, out, lengths, operands, axis, op, partial, allowed)

            readings.append(outcome)
    shard = _first_shard(operands)
    return _agree(readings, _ambiguity(op, axis, operands, f"the shard dim {shard.shard}"))


def _product(choices: Sequence[range]) -> Iterator[tuple[int, ...]]:
    if not choices:
        yield ()
        return
    for first in choices[0]:
        for rest in _product(choices[1:]):
            yield (first, *rest)


def _einsum(b: Einsum, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
    tensors = [o for o in operands if not isinstance(o, Scalar)]
    try:
        _parse_equation(b.equation, len(tensors))
    except ValueError as why:
        raise _mismatch(
            op,
            axis,
            operands,
            f"the checker cannot read the einsum equation {b.equation!r} ({why}), so it cannot follow the split",
            "write the equation as a string literal with one term per operand (letters and '...'), "
            f"or {_gather_fix(axis, _first_shard(operands))}",
        ) from None
    return _einsum_rule((b.equation,), tensors, axis, op, partial)


def _matmul(b: Matmul, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
    return _einsum_rule(b.equations or MATMUL_FORMS, list(operands[:2]), axis, op, partial)


_LINEAR_FORMS = ("...i,oi,o->...o", "...i,i,->...")


def _linear(b: Linear, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
    x, w, bias = (list(operands) + [None, None, None])[:3]
    if bias is None or isinstance(bias, Scalar):
        return _einsum_rule(("...i,oi->...o", "...i,i->..."), [x, w], axis, op, partial)
    return _einsum_rule(_LINEAR_FORMS, [x, w, bias], axis, op, partial)


def _attention(b: Attention, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
    q, k, v, mask = (list(operands) + [None] * 4)[:4]
    if isinstance(mask, AxisType):
        return _einsum_rule(("...le,...se,...sv,...ls->...lv",), [q, k, v, mask], axis, op, partial, allowed=None)
    return _einsum_rule(("...le,...se,...sv->...lv",), [q, k, v], axis, op, partial, allowed=None)


_RULES: dict[type, Callable[..., AxisType]] = {
    Attention: _attention,
    Pointwise: _pointwise,
    Einsum: _einsum,
    Matmul: _matmul,
    Linear: _linear,
    Reduce: _reduce,
    Along: _along,
    Transpose: _transpose,
    Permute: _permute,
    Movedim: _movedim,
    Concat: _concat,
    Stack: _concat,
    Unsqueeze: _unsqueeze,
    Squeeze: _squeeze,
    Flatten: _flatten,
    View: _view,
    Opaque: _opaque,
}


# --------------------------------------------------------------------------
# Collectives (seed 000, "Shard propagation for comms operators")
# --------------------------------------------------------------------------


def global_collective(
    op: str,
    src: AxisType,
    dst: AxisType,
    mapping: dict[str, AxisType],
    axis: str,
    global_axes: Iterable[str],
) -> None:
    """A collective or cast on global ``axis``: check it and update ``mapping`` in place.

    Only the shard forms have propagation rules: ``src=V`` / ``dst=V`` add or
    remove a dim (stack/unbind), which a partition spec cannot say.  The
    input's split must be the ``src`` shard (dim and, among the global axes,
    the minor position: only the last axis splitting a dim can be gathered or
    moved), and a ``dst`` shard makes ``axis`` the minor axis of its dim.
    ``convert`` is the identity in global semantics.
    """
    chosen = set(global_axes) | {axis}
    call = f"{op}(x, {axis}, src={src}, dst={dst})"
    for side, given in (("src", src), ("dst", dst)):
        if given.kind is Kind.V and given.shard is None:
            raise SpmdTypeError(
                Code.SHARD_MISMATCH,
                axis,
                f"{call} uses the varying form ({side}=V) on global axis {axis}: it has no shard propagation "
                f"rule, since it stacks or unbinds the ranks' pieces on a new dim. Fix: use the shard form "
                f"({side}=S(i), with the tensor dim the pieces are split on), or run it in a @local_map({axis}) def.",
            )
    if axis in mapping:
        actual = effective(TensorType.of(mapping), axis, chosen)
        assert actual is not None
        if actual.kind is Kind.V and actual.shard is None:
            raise SpmdTypeError(
                Code.SHARD_MISMATCH,
                axis,
                f"{call} gets a V@{axis} input on global axis {axis}: a varying tensor without a partition spec "
                f"has no global meaning. Fix: annotate it S(i)@{axis}, or run this code in a @local_map({axis}) def.",
            )
        if actual.shard is not None and src.shard is not None and actual.shard != src.shard:
            written = Shard(actual.shard)
            raise SpmdTypeError(
                Code.SHARD_MISMATCH,
                axis,
                f"{call} on global axis {axis} is told src={src}, but the input is {written.on(axis)}, split on "
                f"dim {actual.shard}. Fix: pass src={written}, or first "
                f"all_to_all(x, {axis}, src={written}, dst={src}).",
            )
        if actual.shard is not None and actual.order is not None:
            group = [name for name, t in mapping.items() if name in chosen and t.shard == actual.shard]
            if actual.order != len(group) - 1:
                spec = TensorType.of({name: mapping[name] for name in group})
                raise SpmdTypeError(
                    Code.SHARD_MISMATCH,
                    axis,
                    f"{call} on global axis {axis}: the input is {spec}, where {axis} is not the last (minor) axis "
                    f"splitting dim {actual.shard}, so its pieces are not contiguous and a per-axis collective "
                    f"cannot move them. Fix: spmd.redistribute(x, src=({spec},), dst=(...)) with the whole "
                    f"partition spec, which plans the steps.",
                )
    mapping.pop(axis, None)
    if dst.shard is None:
        mapping[axis] = dst
        mapping.update(normalise_orders(mapping))
        return
    ranked: list[tuple[int, str]] = sorted(
        (t.order if t.order is not None else -1, name) for name, t in mapping.items() if t.shard == dst.shard
    )
    if not ranked:
        mapping[axis] = Shard(dst.shard)
        return
    for position, (_, name) in enumerate(ranked):
        mapping[name] = Shard(dst.shard, position)
    mapping[axis] = Shard(dst.shard, len(ranked))
