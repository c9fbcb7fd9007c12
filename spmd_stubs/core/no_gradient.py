"""Operands that carry no gradient: constants where they are R or I (docs/spec.md#operands-without-a-gradient).

The rule for Invariant exists so that an I value's gradient is the same on
every rank.  A value that gets no gradient (a mask, class indices, a
detached value, anything computed under ``torch.no_grad()``) cannot break
it, and where it is R or I it is the same on every rank either way: it is
judged as a constant (a scalar).  Which operands carry no gradient is the
caller's knowledge (the plugin reads it from the expressions); what follows
from it is decided here.

>>> from spmd_stubs.core.rules import Apply, Arg, Linearity
>>> from spmd_stubs.core.axis_types import Invariant, Replicate, Varying
>>> mul = Apply(Linearity.MULTILINEAR, Arg(0), Arg(1))
>>> print(evaluate_without_gradients(mul, [Varying, Invariant], [False, True], "mul", "tp"))
V
>>> print(evaluate_without_gradients(mul, [Replicate, Invariant], [True, True], "mul", "tp"))
R
>>> evaluate_without_gradients(mul, [Invariant, Varying], [False, True], "mul", "tp")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
spmd_stubs.core.errors.SpmdTypeError: mul mixes Invariant with Varying on axis tp (I@tp, V@tp); ...
"""

from __future__ import annotations

from typing import Sequence

from spmd_stubs.core.axis_types import SCALAR, AxisType, Invariant, Kind, Operand, Replicate
from spmd_stubs.core.checks import check_write
from spmd_stubs.core.errors import SpmdTypeError
from spmd_stubs.core.rules import Effect, Expr, evaluate

_CONSTANT_KINDS = (Kind.R, Kind.I)


def as_constant(operand: Operand) -> Operand:
    """An operand without a gradient: a scalar where it is R or I, itself elsewhere (P and V are forward facts)."""
    if isinstance(operand, AxisType) and operand.kind in _CONSTANT_KINDS:
        return SCALAR
    return operand


def evaluate_without_gradients(
    expr: Expr, operands: Sequence[Operand], free: Sequence[bool], op: str, axis: str, effect: Effect = None,
    adds_bias: bool = False,
) -> AxisType | None:
    """:func:`~spmd_stubs.core.rules.evaluate`, where ``free[k]`` says operand k carries no gradient.

    The operands are judged as they are; where they break a rule, again with
    the gradient-free ones as constants, and the first verdict stands if that
    breaks one too.  An axis on which every typed operand became a constant is
    I if all were I, else R.
    """
    try:
        return evaluate(expr, operands, op, axis, effect, adds_bias)
    except SpmdTypeError as error:
        if not any(free):
            raise
        relaxed = [as_constant(o) if f else o for o, f in zip(operands, free)]
        try:
            value = evaluate(expr, relaxed, op, axis, effect, adds_bias)
        except SpmdTypeError:
            raise error from None
        if value is not None:
            return value
        kinds = {o.kind for o in operands if isinstance(o, AxisType)}
        return Invariant if kinds == {Kind.I} else Replicate


def check_write_without_gradient(
    target: AxisType, value: Operand, free: bool, axis: str, index: Operand = None, form: str = "x[i] = y"
) -> None:
    """:func:`~spmd_stubs.core.checks.check_write`; a value without a gradient that does not fit is
    judged again as a constant (a zero, a mask or a detached copy written into an I buffer)."""
    try:
        check_write(target, value, axis, index, form)
    except SpmdTypeError as error:
        if not free:
            raise
        try:
            check_write(target, as_constant(value), axis, index, form)
        except SpmdTypeError:
            raise error from None
