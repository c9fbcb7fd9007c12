"""Op rules: the type of an ordinary torch op on one axis (docs/spec.md#local-rules).

:func:`evaluate` gives the result type from the operands, given the op's
linearity written as an expression (:class:`Arg`, :class:`Apply`).  Composite
ops are expressions: ``addmm(b, m1, m2)`` is ``Apply(ADDITIVE, Arg(0),
Apply(MULTILINEAR, Arg(1), Arg(2)))``.  Pending max/min operands follow the
op's :data:`Effect` (docs/spec.md#pending-reductions).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Iterable, Sequence, Union

from spmd_stubs.core.axis_types import (
    SCALAR,
    AxisType,
    Invariant,
    Kind,
    Operand,
    Partial,
    PartialOf,
    Replicate,
    Scalar,
    Varying,
)
from spmd_stubs.core.errors import Code, Fix, SpmdTypeError, Target


class Linearity(enum.Enum):
    """How an op treats a pending sum (P) in its operands.

    NONLINEAR    f(sum a) != sum f(a): no P operand allowed (gelu, exp, softmax).
    LINEAR       unary and linear: P -> P (neg, views, sum over dims, clone).
    ADDITIVE     n-ary sum-like: all P -> P, P with anything else is "affine"
                 (add, sub, cat, stack).
    MULTILINEAR  linear in each factor: exactly one P factor, the rest R or
                 scalars (mul, matmul, einsum, div by a non-P denominator).
    SELECT       first operand is a non-differentiable selector (index, mask,
                 condition), the second the data; a replicated selector is
                 neutral, a varying one makes the result vary, a partial one
                 is meaningless; an unknown one takes no part (the data
                 decides), unknown data makes the result unknown.
    """

    NONLINEAR = "nonlinear"
    LINEAR = "linear"
    ADDITIVE = "additive"
    MULTILINEAR = "multilinear"
    SELECT = "select"


@dataclass(frozen=True)
class Arg:
    """The ``index``-th operand of the op."""

    index: int


@dataclass(frozen=True)
class Apply:
    """``linearity`` applied to sub-expressions (the decomposition of an op)."""

    linearity: Linearity
    operands: tuple["Expr", ...]

    def __init__(self, linearity: Linearity, *operands: "Expr") -> None:
        object.__setattr__(self, "linearity", linearity)
        object.__setattr__(self, "operands", tuple(operands))


Expr = Union[Arg, Apply]


def _show(operand: AxisType | Scalar, axis: str) -> str:
    return "scalar" if isinstance(operand, Scalar) else operand.on(axis)


def _shown(operands: Iterable[AxisType | Scalar], axis: str, sep: str) -> str:
    return sep.join(_show(o, axis) for o in operands)


def _reduce_fix(axis: str, dst: str = "R", src: AxisType | None = None, tensor: str = "x") -> str:
    return f"all_reduce({tensor}, {axis}, src={src or Partial}, dst={dst})"


def _reduce(partial: AxisType, axis: str, dst: str) -> Fix:
    """Resolve the operand pending ``partial`` first: its sum (avg, max, min) on every rank."""
    return Fix(Target.OPERAND, _reduce_fix(axis, dst, partial, "{x}"), partial)


def _convert_invariant(axis: str) -> Fix:
    """Retype the Invariant operand as Replicate (same values; its gradient then gets all-reduced)."""
    return Fix(Target.OPERAND, f"convert({{x}}, {axis}, src=I, dst=R)", Invariant)


def _reduced_to(operands: Sequence[Operand]) -> str:
    """Where a reduction should land to combine with the other operands: I beside an I, else R."""
    return "I" if any(isinstance(o, AxisType) and o.kind is Kind.I for o in operands) else "R"


def _partials(operands: Sequence[AxisType | Scalar]) -> list[AxisType]:
    return [o for o in operands if isinstance(o, AxisType) and o.kind is Kind.P]


def _one_reduction(partial: Sequence[AxisType], operands: Sequence[AxisType | Scalar], op: str, axis: str) -> AxisType:
    """The pending reduction the partial operands share; mixing two is an error."""
    reductions = {p.reduce for p in partial}
    if len(reductions) > 1:
        second = sorted(set(partial), key=str)[1]
        raise SpmdTypeError(
            Code.PARTIAL_AFFINE,
            axis,
            f"{op} combines two different pending reductions on axis {axis} "
            f"({_shown(operands, axis, ', ')}); their parts cannot be reduced together. "
            f"Fix: resolve one first, e.g. {_reduce_fix(axis, src=second)} on the "
            f"{second.on(axis)} operand.",
            _reduce(second, axis, "R"),
        )
    return partial[0].local


def _plain_combine(operands: Sequence[AxisType | Scalar], op: str, axis: str, adds_bias: bool) -> AxisType:
    """Combine operands none of which is P: R/I/V and scalars."""
    tensors = [o for o in operands if isinstance(o, AxisType)]
    kinds = {t.kind for t in tensors}
    if Kind.I in kinds and kinds != {Kind.I}:
        other = next(t for t in tensors if t.kind is not Kind.I)
        convert = f"convert(x, {axis}, src=I, dst=R) on the Invariant operand before {op}"
        fix = (f"Fix: {convert} (or, where the result must stay Invariant, make the {other.on(axis)} operand "
               f"I where it is made, e.g. dst=I on the collective that makes it)")
        rewrite = _convert_invariant(axis)
        if other.kind is Kind.V and adds_bias:
            fix, rewrite = (
                f"Fix: if the product is this rank's part of a sum (a row-parallel layer), leave the bias out of "
                f"{op}, reduce the product (reinterpret(y, {axis}, src=V, dst=P), then all_reduce(y, {axis}, "
                f"src=P, dst=I)) and add the bias after; if the output should vary per rank, {convert}"
            ), None
        elif other.kind is Kind.V:
            # Which operand is wrong depends on what the result means: say both.
            fix, rewrite = (
                f"Fix: if the result should vary per rank, {convert} (its gradient then gets all-reduced); if the "
                f"{other.on(axis)} operand is this rank's part of a value every rank should share (a sum "
                f"over a local shard), all_reduce(y, {axis}, src=P, dst=I) on it first"
            ), None
        raise SpmdTypeError(
            Code.INVARIANT_MIX,
            axis,
            f"{op} mixes Invariant with {other.kind.title} on axis {axis} "
            f"({_shown(operands, axis, ', ')}); an Invariant value must get the same "
            f"gradient on every rank, which its use beside {other.on(axis)} cannot promise. "
            f"{fix}.",
            rewrite,
        )
    if Kind.V in kinds:
        return Varying
    if kinds == {Kind.I}:
        return Invariant
    return Replicate


def _nonlinear(operands: Sequence[AxisType | Scalar], op: str, axis: str, adds_bias: bool) -> AxisType:
    partial = _partials(operands)
    if partial:
        raise SpmdTypeError(
            Code.PARTIAL_NONLINEAR,
            axis,
            f"{op} is nonlinear but gets a Partial operand on axis {axis} "
            f"({_shown(operands, axis, ', ')}); f(sum of parts) is not the sum of "
            f"f(parts). Fix: {_reduce_fix(axis, src=partial[0])} (or dst=I) before {op}.",
            _reduce(partial[0], axis, _reduced_to(operands)),
        )
    return _plain_combine(operands, op, axis, adds_bias)


def _additive(operands: Sequence[AxisType | Scalar], op: str, axis: str, adds_bias: bool) -> AxisType:
    partial = _partials(operands)
    if not partial:
        return _plain_combine(operands, op, axis, adds_bias)
    result = _one_reduction(partial, operands, op, axis)
    others = [o for o in operands if not (isinstance(o, AxisType) and o.kind is Kind.P)]
    if not others:
        return result
    shown = _shown(operands, axis, " + ")
    other = others[0]
    if isinstance(other, AxisType) and other.kind is Kind.I:
        raise SpmdTypeError(
            Code.INVARIANT_MIX,
            axis,
            f"{op} mixes Invariant with Partial on axis {axis} ({shown}). "
            f"Fix: {_reduce_fix(axis, 'I', result)} on the Partial operand before {op}.",
            _reduce(result, axis, "I"),
        )
    if isinstance(other, AxisType) and other.kind is Kind.V:
        reduce = (f"{_reduce_fix(axis, src=result)} on the Partial operand first (or reduce_scatter(x, {axis}, "
                  f"src={result}, dst=V) where the Varying operand is this rank's shard of the sum)")
        fix, rewrite = f"Fix: {reduce}", _reduce(result, axis, "R")
        if adds_bias:
            fix, rewrite = (
                f"Fix: if the product is this rank's part of a sum (a row-parallel layer), leave the bias out of "
                f"{op}, reinterpret(y, {axis}, src=V, dst={result}) on the product and add the bias to it "
                f"before the reduction; if the output should vary per rank, {reduce}"
            ), None
        raise SpmdTypeError(
            Code.PARTIAL_VARYING,
            axis,
            f"{op} adds a Partial to a Varying operand on axis {axis} ({shown}); the sum "
            f"would mix one pending sum with per-rank values. {fix}.",
            rewrite,
        )
    if result.reduce == "avg":
        # avg(x_r + c) = avg(x_r) + c: a replicated term is counted once.
        return result
    raise SpmdTypeError(
        Code.PARTIAL_AFFINE,
        axis,
        f"{op} adds a Partial to a non-Partial operand on axis {axis} ({shown}); the "
        f"{_show(other, axis)} term would be counted once per rank by the pending sum. "
        f"Fix: {_reduce_fix(axis)} on the Partial operand first, or "
        f"convert(y, {axis}, src=R, dst=P) on the other term.",
        _reduce(result, axis, "R"),
    )


def _multilinear(operands: Sequence[AxisType | Scalar], op: str, axis: str, adds_bias: bool) -> AxisType:
    partial = _partials(operands)
    if not partial:
        return _plain_combine(operands, op, axis, adds_bias)
    shown = _shown(operands, axis, " * ")
    if len(partial) > 1:
        raise SpmdTypeError(
            Code.PARTIAL_MUL,
            axis,
            f"{op} multiplies {len(partial)} Partial factors on axis {axis} ({shown}); a "
            f"product of pending sums is not the sum of products. Fix: "
            f"{_reduce_fix(axis, src=partial[0])} on all but one factor first.",
            _reduce(partial[0], axis, "R"),
        )
    for other in operands:
        if isinstance(other, AxisType) and other.kind is Kind.V:
            raise SpmdTypeError(
                Code.PARTIAL_VARYING,
                axis,
                f"{op} multiplies a Partial by a Varying factor on axis {axis} ({shown}); "
                f"each rank would scale its part of the sum differently. Fix: "
                f"{_reduce_fix(axis, src=partial[0])} on the Partial factor first.",
                _reduce(partial[0], axis, "R"),
            )
        if isinstance(other, AxisType) and other.kind is Kind.I:
            raise SpmdTypeError(
                Code.INVARIANT_MIX,
                axis,
                f"{op} mixes Invariant with Partial on axis {axis} ({shown}). Fix: "
                f"convert(w, {axis}, src=I, dst=R) on the Invariant factor "
                f"(its gradient then gets all-reduced), or {_reduce_fix(axis, 'I', partial[0])} on "
                f"the Partial one.",
                _convert_invariant(axis),
            )
    return partial[0].local


def _select(operands: Sequence[AxisType | Scalar], op: str, axis: str, adds_bias: bool) -> AxisType:
    if len(operands) == 1:
        # The selector is unknown (an untyped tensor: labels from a data loader): it takes
        # no part in the judgement, as any unknown operand, and the data decides, as beside
        # a replicated selector (docs/spec.md#select).
        [data] = operands
        assert isinstance(data, AxisType)
        return data.local
    selector, data = operands
    if isinstance(selector, AxisType) and selector.kind is Kind.P:
        raise SpmdTypeError(
            Code.PARTIAL_NONLINEAR,
            axis,
            f"{op} uses a Partial tensor as an index/mask/condition on axis {axis} "
            f"({_show(selector, axis)}); a pending sum cannot select. Fix: "
            f"{_reduce_fix(axis, src=selector)} on it first.",
            _reduce(selector, axis, "R"),
        )
    if isinstance(selector, AxisType) and selector.kind is Kind.V:
        return _multilinear([selector, data], op, axis, adds_bias)
    # A replicated selector is neutral: it gets no gradient, so R and I
    # selectors both keep the data's type (scalar data takes the selector's;
    # evaluate never passes two scalars).
    if isinstance(data, Scalar):
        assert isinstance(selector, AxisType)
        return selector.local
    return data.local


_RULES = {  # each: (the operands on one axis, the op's name, the axis, whether it adds a bias) -> the result
    Linearity.NONLINEAR: _nonlinear,
    # A unary linear op is a multilinear op with one factor.
    Linearity.LINEAR: _multilinear,
    Linearity.ADDITIVE: _additive,
    Linearity.MULTILINEAR: _multilinear,
    Linearity.SELECT: _select,
}


class Monotone(enum.Enum):
    """How an op orders its result by an operand: what a pending max/min may pass through.

    A pending max ``Pmax`` means ``max over ranks of the parts``; an op ``f``
    keeps it exactly when ``f(max_r x_r) == max_r f(x_r)``.

    MOVES       data movement (views, indexing, cat, stack): every element keeps its value.
    INCREASING  elementwise non-decreasing in this operand (exp, relu, ``x + c``).
    DECREASING  elementwise non-increasing in this operand (neg, ``c - x``): max becomes min.
    MAX / MIN   a max (min) over tensor dims: commutes with a pending max (min) only.

    A replicated operand is a valid pending max of itself (every rank holds
    it), so R and scalars may sit beside a ``Pmax`` operand of a MOVES op; an
    INCREASING/DECREASING op takes one pending operand, the rest replicated.
    """

    MOVES = "moves"
    INCREASING = "increasing"
    DECREASING = "decreasing"
    MAX = "max"
    MIN = "min"


_FLIPPED = {"max": "min", "min": "max"}

Effect = Union[Monotone, Sequence[Monotone], None]
"""An op's :class:`Monotone` for every operand, or one per operand position."""


def _effect_at(effect: Effect, position: int) -> Monotone | None:
    """The op's :class:`Monotone` in the operand at ``position``."""
    if effect is None or isinstance(effect, Monotone):
        return effect
    return effect[position] if position < len(effect) else None


def _extremum(
    operands: Sequence[tuple[int, AxisType | Scalar]], effect: Effect, op: str, axis: str
) -> AxisType:
    """An op with a pending max/min operand (only ops that distribute over it: docs/spec.md#pending-reductions)."""
    values = [value for _, value in operands]
    partial = _partials(values)
    pending = _one_reduction(partial, values, op, axis)
    shown = _shown(values, axis, ", ")
    fix = f"Fix: {_reduce_fix(axis, src=pending)} before {op}"
    for other in values:
        if isinstance(other, AxisType) and other.kind in (Kind.V, Kind.I):
            code = Code.PARTIAL_VARYING if other.kind is Kind.V else Code.INVARIANT_MIX
            raise SpmdTypeError(
                code, axis, f"{op} combines {pending.on(axis)} with {other.on(axis)} on axis {axis} ({shown}). {fix}.",
                _reduce(pending, axis, _reduced_to(values)),
            )
    pending_effects = {
        _effect_at(effect, position) for position, value in operands if isinstance(value, AxisType) and value.kind is Kind.P
    }
    only = next(iter(pending_effects)) if len(pending_effects) == 1 else None
    if only is Monotone.MOVES:
        return pending
    if only in (Monotone.MAX, Monotone.MIN) and only.value == pending.reduce:
        return pending
    if only in (Monotone.INCREASING, Monotone.DECREASING):
        if len(partial) > 1:
            raise SpmdTypeError(
                Code.PARTIAL_MUL,
                axis,
                f"{op} combines {len(partial)} operands pending a {pending.reduce} on axis {axis} "
                f"({shown}); {op} of two {pending.reduce}ima is not the {pending.reduce}imum of the {op}s. "
                f"{fix} on all but one operand.",
                _reduce(pending, axis, "R"),
            )
        if only is Monotone.INCREASING:
            return pending
        return PartialOf(_FLIPPED[pending.reduce])
    raise SpmdTypeError(
        Code.PARTIAL_NONLINEAR,
        axis,
        f"{op} does not commute with the pending {pending.reduce} of {pending.on(axis)} on axis {axis} "
        f"({shown}): only data movement and ops monotone in that operand (exp, relu, x + c, "
        f"neg, a {pending.reduce} over dims) may keep it. {fix}.",
        _reduce(pending, axis, "R"),
    )


def evaluate(
    expr: Expr, operands: Sequence[Operand], op: str, axis: str, effect: Effect = None, adds_bias: bool = False
) -> AxisType | None:
    """The type on ``axis`` of ``expr`` applied to ``operands``.

    ``None`` operands (unknown on this axis: an untyped tensor, or a typed one
    that does not mention the axis) are left out of the judgement, as
    gradual typing asks; when only unknowns and scalars remain, the result is
    unknown.  An unknown selector of a SELECT is no exception: the data
    decides (unknown data makes the result unknown: the selector gives none
    of its values).  A result is never a shard: a local op on ``S(i)`` gives V.
    ``effect`` is the op's :class:`Monotone` behaviour, needed only when a
    pending max/min meets the top-level expression.  ``adds_bias``: the op
    adds a bias to a product (its record's ``bias``), so a fix for a product
    that is a rank's part of a sum says to add the bias after the reduction.
    Raises :class:`SpmdTypeError` naming ``op`` and ``axis``.

    >>> add = Apply(Linearity.ADDITIVE, Arg(0), Arg(1))
    >>> print(evaluate(add, [Partial, Partial], "add", "tp"))
    P
    >>> print(evaluate(add, [Replicate, Varying], "add", "tp"))
    V
    >>> evaluate(add, [Partial, Replicate], "add", "tp")
    Traceback (most recent call last):
    ...
    spmd_stubs.core.errors.SpmdTypeError: add adds a Partial to a non-Partial operand on axis tp (P@tp + R@tp); ...
    >>> mul = Apply(Linearity.MULTILINEAR, Arg(0), Arg(1))
    >>> print(evaluate(mul, [Partial, SCALAR], "mul", "tp"))
    P
    >>> print(evaluate(mul, [Partial, None], "mul", "tp"))
    P
    >>> print(evaluate(mul, [None, SCALAR], "mul", "tp"))
    None
    >>> select = Apply(Linearity.SELECT, Arg(1), Apply(Linearity.NONLINEAR, Arg(0)))  # cross_entropy(x, labels)
    >>> print(evaluate(select, [Replicate, None], "cross_entropy", "tp"))
    R
    >>> print(evaluate(select, [None, Varying], "cross_entropy", "tp"))
    None
    """
    try:
        return _evaluate(expr, operands, op, axis, effect, adds_bias)
    except SpmdTypeError as error:
        raise _landing_beside(error, operands) from None


def _landing_beside(error: SpmdTypeError, operands: Sequence[Operand]) -> SpmdTypeError:
    """``error`` whose fix reduces to R, reducing to I instead where the op has an Invariant operand.

    A rule judging a part of a composite op (``layer_norm``'s normalisation)
    sees only that part's operands; the reduced value meets the others (an
    Invariant weight) after it, where R would break the rule for I.
    """
    fix = error.fix
    if fix is None or not fix.template.startswith("all_reduce(") or _reduced_to(operands) != "I":
        return error
    landed = replace(fix, template=fix.template[: -len("dst=R)")] + "dst=I)")
    return SpmdTypeError(error.code, error.axis, error.message, landed)


def _evaluate(
    expr: Expr, operands: Sequence[Operand], op: str, axis: str, effect: Effect, adds_bias: bool
) -> AxisType | None:
    if isinstance(expr, Arg):
        operand = operands[expr.index] if expr.index < len(operands) else None
        return operand.local if isinstance(operand, AxisType) else None
    known: list[tuple[int, AxisType | Scalar]] = []
    for position, sub in enumerate(expr.operands):
        if isinstance(sub, Arg) and sub.index < len(operands) and isinstance(
            operands[sub.index], Scalar
        ):
            known.append((position, SCALAR))
            continue
        # ``effect`` is the whole op's: a pending max/min may meet only its top level.
        value = _evaluate(sub, operands, op, axis, effect=None, adds_bias=adds_bias)
        if value is not None:
            known.append((position, value))
        elif expr.linearity is Linearity.SELECT and position == 1:
            # Unknown data: the selector gives none of the result's values.
            # An unknown selector, as any unknown operand, takes no part: the data decides.
            return None
    values = [value for _, value in known]
    if not any(isinstance(k, AxisType) for k in values):
        return None
    if any(isinstance(k, AxisType) and k.extremum for k in values):
        return _extremum(known, effect, op, axis)
    return _RULES[expr.linearity](values, op, axis, adds_bias)


