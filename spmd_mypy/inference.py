"""Applying the op table: the SPMD type of a torch op's result, per axis, over union members.

Every hook of a modelled op (:mod:`spmd_mypy.calls`, :mod:`spmd_mypy.scalars`,
:mod:`spmd_mypy.global_mode.refine`) describes the call as an :class:`OpCall`
and types it with :func:`op_result`.  An operand is a set of alternatives (a
union after a branch join gives several); every combination is judged by
:func:`spmd_stubs.core.evaluate` on every axis any operand mentions, and the
result is the union of the combinations' results.  An operand that does not
mention an axis is unknown there (gradual typing; reported as
``spmd-missing-axis`` in strict mode).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence, Union

from mypy.literals import literal_hash
from mypy.nodes import CallExpr, Context, Expression, GeneratorExpr, ListComprehension, ListExpr, RefExpr, TupleExpr
from mypy.plugin import CheckerPluginInterface
from mypy.types import Instance, NoneType, TupleType, Type, get_proper_type

from spmd_mypy import errorcodes, report
from spmd_mypy.config import Config
from spmd_mypy.fixes import Operand
from spmd_mypy.fullnames import FUNCTION_MODULES
from spmd_mypy.gradients import carries_no_gradient
from spmd_mypy.representation import members, result_type, spmd_members, spmd_of, tensor_instance
from spmd_stubs import core
from spmd_stubs.core import (
    SCALAR,
    Apply,
    Arg,
    AxisType,
    Effect,
    Expr,
    Replicate,
    Scalar,
    SpmdTypeError,
    TensorType,
)
from spmd_stubs.core.torch_ops import CONSTANT_FACTORIES, Op, Variadic

_MAX_COMBINATIONS = 64
_NUMBERS = frozenset({"builtins.int", "builtins.float", "builtins.bool", "builtins.complex"})


class Everywhere:
    """A fixed-value factory call used as an operand: R on every axis."""

    def __repr__(self) -> str:
        return "constant"


EVERYWHERE = Everywhere()
ABSENT = None


Choice = Union[TensorType, Scalar, Everywhere, None]
"""One alternative for one operand: a known type, a scalar, a constant, or unknown/absent."""


@dataclass
class Actual:
    """One argument as the call gives it."""

    expr: Expression | None
    type: Type


Refine = Callable[[Sequence[Choice], TensorType | None], TensorType | None]
"""Global SPMD (:mod:`spmd_mypy.global_mode`): a combination's local result refined on the global axes."""


@dataclass
class OpCall:
    """A call of a modelled op: its name, operands in its record's order, the record, and where it is."""

    name: str
    """The op as messages name it (``sub`` for ``__rsub__``)."""
    operands: list[list[Actual]]
    """Per parameter (receiver first for methods), the actuals bound to it."""
    context: Context
    api: CheckerPluginInterface
    config: Config
    record: Op
    """The record the call is judged by (``b - a`` by ``__sub__``'s even where mypy calls ``a.__rsub__(b)``)."""
    refine: Refine | None = None


def choices(actual: Actual) -> list[Choice]:
    """The alternatives one actual contributes as an operand."""
    if actual.expr is not None and _is_constant_factory(actual.expr):
        return [EVERYWHERE]
    options: list[Choice] = []
    for member in members(actual.type):
        options.extend(_member_choices(member))
    return options or [ABSENT]


def _member_choices(member: Type) -> list[Choice]:
    proper = get_proper_type(member)
    if tensor_instance(proper) is not None:
        return [spmd_of(proper)]  # a member is no union: its one tensor
    if isinstance(proper, NoneType):
        return [ABSENT]
    if isinstance(proper, TupleType):
        # x[i, j]: the tensors among the index items select.
        tensors: list[Choice] = [t for item in proper.items for t in spmd_members(item)]
        return tensors or [SCALAR]
    # Python numbers, slices, Ellipsis, shapes: neutral scalars.
    return [SCALAR]


def _is_constant_factory(expr: Expression) -> bool:
    if not (isinstance(expr, CallExpr) and isinstance(expr.callee, RefExpr)):
        return False
    callee = expr.callee.node
    module, _, name = (callee.fullname if callee is not None else expr.callee.fullname).rpartition(".")
    return name in CONSTANT_FACTORIES and f"{module}." in FUNCTION_MODULES


def expand(call: OpCall) -> tuple[Expr, list[Actual | None]]:
    """The record's rule as an expression over a flat operand list, with the actual of each operand."""
    rule = call.record.rule
    if isinstance(rule, Variadic):
        flat = [a for group in call.operands[rule.start :] for a in tensors_in(group, call.api)]
        flat = [a for a in flat if not all(isinstance(c, Scalar) for c in choices(a))]
        return Apply(rule.linearity, *(Arg(i) for i in range(len(flat)))), list(flat)
    return rule, [group[0] if group else None for group in call.operands]


def tensors_in(group: list[Actual], api: CheckerPluginInterface) -> Iterator[Actual]:
    """The tensors in a parameter: list/tuple displays item by item, comprehensions by their
    element, other sequences by item type.

    (mypy infers a comprehension in the parameter's context, ``list[Tensor]``:
    its element expression keeps the SPMD type.)
    """
    for actual in group:
        if isinstance(actual.expr, (ListExpr, TupleExpr)):
            for item in actual.expr.items:
                yield Actual(item, type_of(api, item))
            continue
        if isinstance(actual.expr, (ListComprehension, GeneratorExpr)):
            generator = actual.expr.generator if isinstance(actual.expr, ListComprehension) else actual.expr
            yield Actual(generator.left_expr, type_of(api, generator.left_expr))
            continue
        proper = get_proper_type(actual.type)
        if isinstance(proper, Instance) and tensor_instance(proper) is None and proper.args:
            yield Actual(None, proper.args[0])
        else:
            yield actual


def type_of(api: CheckerPluginInterface, expr: Expression, context: Type | None = None) -> Type:
    """The type mypy already inferred for ``expr`` (inferred silently in ``context`` if absent).

    A signature hook sees its call's arguments before mypy infers them; given
    the formal parameter's type as ``context``, this inference is the one mypy
    makes next for a call, list, tuple, dict or operator expression (its
    expression cache is keyed by the expression and the context), so mypy
    reuses it (with its errors) instead of inferring the argument again.
    """
    known = api.lookup_type_or_none(expr)  # type: ignore[attr-defined]
    if known is not None:
        return known  # type: ignore[no-any-return]
    with api.msg.filter_errors():
        return api.get_expression_type(expr, context)


def _referenced(expr: Expr) -> set[int]:
    if isinstance(expr, Arg):
        return {expr.index}
    return set().union(*(_referenced(sub) for sub in expr.operands))


def on_axis(choice: Choice, axis: str) -> AxisType | Scalar | None:
    """One alternative as an operand on ``axis``: a tensor's type there, R for a constant, a scalar or
    unknown as it is."""
    if isinstance(choice, TensorType):
        return choice.get(axis)
    if isinstance(choice, Everywhere):
        return Replicate
    return choice


Verdict = tuple[Union[TensorType, None], tuple[SpmdTypeError, ...]]
"""A combination's result (unknown on the axes that broke a rule) and the rules it broke."""


@functools.lru_cache(maxsize=4096)
def judge(expr: Expr, combination: tuple[Choice, ...], op: str, effect: Effect = None, adds_bias: bool = False,
          free: tuple[bool, ...] = ()) -> Verdict:
    """The result type of one combination of operand types, axis by axis; ``effect`` and
    ``adds_bias`` are the op record's facts, and ``free`` marks the operands that carry no
    gradient (:func:`spmd_stubs.core.evaluate_without_gradients`).

    An axis that breaks a rule is unknown in the result, so one mistake gives
    one error, not a cascade, and the other axes keep their types (the loss
    rule at ``backward()`` is still checked there).  Cached: a code base
    applies the same ops to the same few types over and over.
    """
    axes = sorted({axis for c in combination if isinstance(c, TensorType) for axis, _ in c.axes})
    free = free or (False,) * len(combination)
    result: dict[str, AxisType] = {}
    errors: list[SpmdTypeError] = []
    for axis in axes:
        operands = [on_axis(c, axis) for c in combination]
        try:
            value = core.evaluate_without_gradients(expr, operands, free, op, axis, effect, adds_bias)
        except SpmdTypeError as error:
            errors.append(error)
            continue
        if value is not None:
            result[axis] = value
    return (TensorType.of(result) if result else None), tuple(errors)


GradientBuffer = Callable[[], bool]
"""Whether the written tensor is a gradient buffer (asked only where a write does not fit)."""


def op_result(call: OpCall, declared: Type, written: Type | None = None,
              gradient: GradientBuffer | None = None) -> Type | None:
    """The type of a modelled op's result, reporting the rules it breaks; None where no operand is typed.

    The result is ``declared`` with the inferred SPMD types put into its
    tensors.  An in-place call (``x.add_(y)``, ``x += y``, ``torch.add(a, b,
    out=x)``) writes into a tensor of type ``written``, which keeps its type:
    the op's out-of-place result must equal it (``spmd-inplace``), or, where
    ``gradient`` says it is a gradient buffer, be its gradient with the
    reductions done (:func:`spmd_stubs.core.takes_reduced_gradient`).
    """
    results = infer(call)
    if results is None:
        return None
    if written is None:
        return result_type(call.api, declared, results)
    _check_written(call, results, written, gradient)
    return result_type(call.api, declared, spmd_members(written))


def _check_written(call: OpCall, results: list[TensorType | None], written: Type,
                   gradient: GradientBuffer | None) -> None:
    """Each alternative of the written tensor against each of the op's results
    (:func:`spmd_stubs.core.check_inplace`)."""
    buffer: bool | None = None  # asked once, and only for a write that does not fit
    for target in spmd_members(written):
        for result in results:
            if target is None or result is None:
                continue
            for axis, axis_type in target.axes:
                try:
                    core.check_inplace(call.name, axis_type, result.get(axis), axis)
                except SpmdTypeError as error:
                    if buffer is None:
                        buffer = gradient is not None and gradient()
                    if buffer and core.takes_reduced_gradient(axis_type, result.get(axis)):
                        continue
                    report.rule_error(call.api, call.context, error)


def infer(call: OpCall) -> list[TensorType | None] | None:
    """The result's alternatives, reporting rule violations; None when nothing is typed.

    Operands that are the same value (``y * y``) take the same union member.
    """
    expr, actuals = expand(call)
    operand_choices: list[list[Choice]] = [choices(a) if a is not None else [ABSENT] for a in actuals]
    if not any(isinstance(c, TensorType) for options in operand_choices for c in options):
        return None
    combinations = list(itertools.islice(_combinations(operand_choices, actuals), _MAX_COMBINATIONS + 1))
    if len(combinations) > _MAX_COMBINATIONS:
        return [None]
    effect, adds_bias = call.record.effect, call.record.bias is not None
    results: list[TensorType | None] = []
    free: tuple[bool, ...] | None = None  # looked for once, and only when a rule breaks: it walks the function
    for combination in combinations:
        if call.config.strict:
            _report_missing_axes(expr, combination, call)
        result, errors = judge(expr, combination, call.name, effect, adds_bias)
        if errors:
            free = _without_gradient(operand_choices, actuals, call) if free is None else free
            if any(free):
                result, errors = judge(expr, combination, call.name, effect, adds_bias, free)
        for error in errors:
            operands = [Operand(a.expr if a is not None else None, on_axis(c, error.axis))
                        for a, c in zip(actuals, combination)]
            report.rule_error(call.api, call.context, error, operands)
        if call.refine is not None and not errors:
            try:
                result = call.refine(combination, result)
            except SpmdTypeError as error:
                report.rule_error(call.api, call.context, error)
                result = None
        results.append(result)
    return results


def _combinations(operand_choices: list[list[Choice]], actuals: list[Actual | None]) -> Iterator[tuple[Choice, ...]]:
    """Every combination of the operands' alternatives in which one value (one name, one ``self.x``)
    is the same alternative wherever it occurs (mypy may have narrowed one occurrence already)."""
    keys = [literal_hash(a.expr) if a is not None and a.expr is not None else None for a in actuals]
    for combination in itertools.product(*operand_choices):
        chosen: dict[object, Choice] = {}
        if all(chosen.setdefault(key, choice) == choice for key, choice in zip(keys, combination) if key is not None):
            yield combination


def _without_gradient(operand_choices: list[list[Choice]], actuals: list[Actual | None],
                      call: OpCall) -> tuple[bool, ...]:
    """Which operands carry no gradient (:mod:`spmd_mypy.gradients`; a constant factory never does)."""
    return tuple(any(isinstance(c, Everywhere) for c in options)
                 or (a is not None and carries_no_gradient(a.expr, call.context, call.api))
                 for options, a in zip(operand_choices, actuals))


def _report_missing_axes(expr: Expr, combination: Sequence[Choice], call: OpCall) -> None:
    typed = [(i, c) for i, c in enumerate(combination) if isinstance(c, TensorType) and i in _referenced(expr)]
    axes = {axis for _, c in typed for axis, _ in c.axes}
    for index, choice in typed:
        for axis in sorted(axes - {a for a, _ in choice.axes}):
            report.fail(
                call.api,
                call.context,
                f"operand {index} of {call.name} is Tensor[{choice}], which does not mention axis {axis} "
                f"that another operand does; its type there is unknown. Fix: annotate it on {axis} or "
                f"x = assert_type(x, <type>@{axis}).",
                errorcodes.MISSING_AXIS,
            )
