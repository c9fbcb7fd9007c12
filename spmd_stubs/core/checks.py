"""Rules on whole statements: in-place writes, backward seeds, type asserts."""

from __future__ import annotations

from spmd_stubs.core.axis_types import AxisType, Invariant, Kind, Operand, Partial, Replicate, Scalar
from spmd_stubs.core.comms import instead, instead_template
from spmd_stubs.core.errors import Code, Fix, SpmdTypeError, Target


def check_inplace(op: str, written: AxisType, result: AxisType | None, axis: str) -> None:
    """An in-place op (or ``out=``) keeps the written tensor's type: the result must have it.

    ``result`` None (unknown on this axis) is accepted, as gradual typing asks.
    """
    if result is None or result.local == written.local:
        return
    raise SpmdTypeError(
        Code.INPLACE,
        axis,
        f"in-place {op} would change its target from {written.on(axis)} to {result.on(axis)} on "
        f"axis {axis}, but a tensor written in place keeps its type. Fix: use the out-of-place "
        f"form (y = {op.rstrip('_')}(...)) and bind the {result.on(axis)} result to a new name.",
    )


def check_write(target: AxisType, value: Operand, axis: str, index: Operand = None, form: str = "x[i] = y") -> None:
    """``x[i] = y`` (``Tensor.__setitem__``, or ``x.copy_(y)``, named by ``form`` in messages): x keeps
    its type, which the write must not change.

    ``target`` is x's type on ``axis``, ``value`` y's (None: unknown, accepted
    as gradual typing asks; a python scalar), ``index`` i's.  A write fits
    when x would keep its type with y's values in place: y of x's own type;
    a python scalar into anything but a pending sum (every rank's part would
    hold it; the plugin lets a literal zero through, which fits every type);
    R (or a scalar) into V, or into a pending avg/max/min (a value the same
    on every rank is its own avg, max and min).  An index that
    varies writes at different positions on each rank: only a varying x
    stays what it was.  A Partial index cannot select (as for ``x[i]``).
    """
    _check_write_index(target, index, axis)
    if value is None or _fits(target, value):
        return
    if isinstance(value, Scalar):
        why = "every rank's part would hold the number, so the pending sum would count it once per rank"
        fix = f"Fix: all_reduce(x, {axis}, src={target}, dst=R) before the write, and write into its R result"
        raise SpmdTypeError(Code.INPLACE, axis, _write_message(form, target, "a python scalar", axis, why, fix))
    why, fix, template = _why_the_value_does_not_fit(target, value, axis)
    rewrite = Fix(Target.OPERAND, template, value) if template else None
    raise SpmdTypeError(Code.INPLACE, axis, _write_message(form, target, f"y of type {value.on(axis)}", axis, why, fix),
                        rewrite)


def takes_reduced_gradient(gradient: AxisType, value: Operand) -> bool:
    """Whether a gradient buffer (``p.grad``, or a name bound to it) of type ``gradient`` on an axis
    takes ``value`` as that gradient with its pending sum resolved: R or I where it is P.

    Reads of a gradient buffer are the pending gradient whatever was written
    (the type cannot follow the write), so the sync may land in it: ``p.grad =
    all_reduce(p.grad, ax, src=P, dst=R)``, ``g.copy_(...)`` of the same
    (docs/spec.md#writes-in-place).

    >>> takes_reduced_gradient(Partial, Replicate), takes_reduced_gradient(Invariant, Partial)
    (True, False)
    """
    return gradient == Partial and value in (Replicate, Invariant)


def check_gradient_write(gradient: AxisType, value: Operand, axis: str, index: Operand = None,
                         form: str = "x.copy_(y)") -> None:
    """:func:`check_write` into a gradient buffer of type ``gradient``: it also takes the gradient with its
    pending sum resolved (:func:`takes_reduced_gradient`), written where the gradient itself could be (a
    varying or partial index still may not write)."""
    if takes_reduced_gradient(gradient, value):
        value = gradient
    check_write(gradient, value, axis, index, form)


def _check_write_index(target: AxisType, index: Operand, axis: str) -> None:
    """A Partial index cannot select; a varying one writes different positions on each rank."""
    x, shown = target.on(axis), f"x: {target.on(axis)}"
    if isinstance(index, AxisType) and index.kind is Kind.P:
        raise SpmdTypeError(
            Code.PARTIAL_NONLINEAR,
            axis,
            f"x[i] = y uses a Partial tensor as the index on axis {axis} ({shown}, i: {index.on(axis)}); "
            f"a pending sum cannot select positions. Fix: all_reduce(i, {axis}, src={index}, dst=R) first.",
            Fix(Target.OPERAND, f"all_reduce({{x}}, {axis}, src={index}, dst=R)", index),
        )
    if isinstance(index, AxisType) and index.kind is Kind.V and target.local.kind is not Kind.V:
        raise SpmdTypeError(
            Code.INPLACE,
            axis,
            f"x[i] = y writes at positions that differ between ranks on axis {axis} ({shown}, i: "
            f"{index.on(axis)}), so x would no longer be {x}, but a tensor written in place keeps its "
            f"type. Fix: an index that is R on {axis} (the same positions on every rank), or write out "
            f"of place and bind the result to a new name, e.g. x2 = torch.where(mask, y, x).",
        )


def _fits(target: AxisType, value: AxisType | Scalar) -> bool:
    """Whether x keeps its type with the written values in place."""
    if isinstance(value, Scalar):
        return target.kind is not Kind.P or target.reduce != "sum"
    if value.local == target.local:
        return True
    return value.kind is Kind.R and (target.local.kind is Kind.V or (target.kind is Kind.P and target.reduce != "sum"))


def _why_the_value_does_not_fit(target: AxisType, value: AxisType, axis: str) -> tuple[str, str, str | None]:
    """Why writing ``value`` into ``target`` changes the target's type, the fix, and the call on the
    value that makes it fit (None: the fix needs a choice)."""
    if value.kind is Kind.P and target.kind is not Kind.P:
        why = f"the written elements would be parts of a pending {value.reduce} among {target.kind.title} values"
        reduce = f"all_reduce({{x}}, {axis}, src={value}, dst={'I' if target.kind is Kind.I else 'R'})"
        return why, f"Fix: {reduce.format(x='y')} first", reduce
    if value.local.kind is Kind.V and target.kind in (Kind.R, Kind.I):
        fix = (
            f"write a value that is {target} on {axis}, or write out of place and bind the V result to a new "
            f"name, e.g. x2 = torch.where(mask, y, x)"
        )
        return "its ranks would then hold different values", f"Fix: {fix}", None
    if target.kind is Kind.P and target.reduce == "sum" and value.kind is not Kind.P:
        why = "every rank's part would hold the written values, so the pending sum would add up all of them"
        reduce_first = f"all_reduce(x, {axis}, src=P, dst=R) before the write, and write into its R result"
        if value.kind is Kind.R:
            convert = f"convert({{x}}, {axis}, src=R, dst=P)"
            return why, (f"Fix: {convert.format(x='y')} (the value on one rank, zeros on the others), "
                         f"or {reduce_first}"), convert
        if value.kind is Kind.V:
            return why, (f"Fix: reinterpret(y, {axis}, src=V, dst=P) if the ranks' values are the parts of the "
                         f"sum, or {reduce_first}"), None
        return why, f"Fix: {reduce_first}", None
    # R fits into V: a cast to R keeps the values, one to V would slice them.
    goal = Replicate if target.local.kind is Kind.V else target
    why = f"x would then mix {target.on(axis)} and {value.on(axis)} elements"
    return why, f"Fix: {instead(value, goal, axis).replace('(x, ', '(y, ')} first", instead_template(value, goal, axis)


def _write_message(form: str, target: AxisType, what: str, axis: str, why: str, fix: str) -> str:
    return (
        f"{form} writes {what} into x of type {target.on(axis)} on axis {axis}, but a tensor "
        f"written in place keeps its type, and {why}. {fix}."
    )


_LOSS_FIX = {
    Kind.R: ("convert({x}, {axis}, src=R, dst=P)", " (the loss counted once), or all_gather/all_reduce with dst=I "
             "instead of dst=R before the loss, so every rank computes the same loss"),
    Kind.V: ("reinterpret({x}, {axis}, src=V, dst=P)", " if the global loss is the sum of the ranks' losses "
             "(typical on dp/cp), or all_reduce(loss, {axis}, src=V, dst=I)"),
}
"""Per kind of a wrong loss: the call that counts it once as a pending sum, and what else would do."""


def check_loss(loss: AxisType, axis: str, call: str = "backward()") -> None:
    """The loss rule (docs/spec.md#loss-rule): a backward with the implicit gradient 1.0 needs I or P on every axis.

    The seed 1.0 on each rank is the dual gradient of an I loss (I) and of a P
    loss (R); for an R or V loss it is the wrong gradient.

    >>> from spmd_stubs.core import Invariant, Replicate, Partial
    >>> check_loss(Invariant, "dp")
    >>> check_loss(Partial, "dp")
    >>> check_loss(Replicate, "cp")
    Traceback (most recent call last):
    ...
    spmd_stubs.core.errors.SpmdTypeError: the loss of backward() is R@cp on axis cp; it seeds the gradient 1.0 ...
    """
    if loss.kind is Kind.I or loss == Partial:
        return
    if loss.kind is Kind.P:
        raise SpmdTypeError(
            Code.BACKWARD,
            axis,
            f"the loss of {call} is {loss.on(axis)} on axis {axis}; it seeds the gradient 1.0 on every rank, "
            f"which is right for a pending sum but not for a pending {loss.reduce}. Fix: "
            f"all_reduce(loss, {axis}, src={loss}, dst=I) first.",
            Fix(Target.OPERAND, f"all_reduce({{x}}, {axis}, src={loss}, dst=I)", loss),
        )
    template, otherwise = (part.replace("{axis}", axis) for part in _LOSS_FIX[loss.kind])
    raise SpmdTypeError(
        Code.BACKWARD,
        axis,
        f"the loss of {call} is {loss.on(axis)} on axis {axis}; it seeds the gradient 1.0 on every rank, "
        f"which is only right for an Invariant or Partial loss. Fix: "
        f"{template.format(x='loss')}{otherwise}.",
        Fix(Target.OPERAND, template, loss),
    )


def check_asserted(actual: AxisType, asserted: AxisType, axis: str) -> None:
    """``assert_type`` may refine an unknown type but not contradict a known one (V and S(i) agree)."""
    if actual.local == asserted.local:
        return
    if actual.kind is Kind.V and asserted.kind is Kind.P:
        # Asserting P of per-rank values means "these are parts of a sum": a reinterpret says so.
        fix = (f"reinterpret(x, {axis}, src=V, dst={asserted}) first if each rank's values are its part of "
               f"the sum (convert(..., expert_mode=True) would instead zero-pad to keep the values)")
    else:
        fix = f"first {instead(actual, asserted, axis)}"
    raise SpmdTypeError(
        Code.ASSERT,
        axis,
        f"assert_type says {asserted.on(axis)} but the value is {actual.on(axis)} on axis {axis}. "
        f"Fix: correct the assertion, or {fix}.",
    )
