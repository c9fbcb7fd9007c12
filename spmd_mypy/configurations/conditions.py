"""What a condition is in one configuration: true, false, or undecided (None).

A flag is read where code tests it, by its name: a name (``sequence_parallel``,
a parameter) or any attribute of that name (``self.sequence_parallel``,
``config.sequence_parallel``, ``self.config.tp_mode``, ``spmd.flags.sp``).
Decided, with three-valued logic (an undecided operand decides nothing that
its value could change):

* a boolean flag, ``not``, ``and``, ``or``;
* a flag compared by ``==``, ``!=``, ``is``, ``is not`` with a constant:
  ``True``/``False``/``None``, a number, a string, or an enum member, which
  matches a flag whose value is the member's name
  (``mode is TensorParallelLinearMode.REDUCE_SCATTER`` with
  ``mode = "REDUCE_SCATTER"``).

Anything else (a call, a flag no configuration sets, ``in``) is undecided:
both branches are checked, as without configurations.
"""

from __future__ import annotations

from typing import Mapping

from mypy.nodes import ComparisonExpr, Expression, IntExpr, MemberExpr, NameExpr, OpExpr, StrExpr, UnaryExpr

from spmd_mypy.configurations.declared import FlagValue

Flags = Mapping[str, FlagValue]

_CONSTANT_NAMES = {"True": True, "False": False}
_EQUAL = {"==": True, "is": True, "!=": False, "is not": False}


def truth(condition: Expression, flags: Flags) -> bool | None:
    """Whether ``condition`` holds under ``flags``; None where they do not decide it."""
    if isinstance(condition, UnaryExpr) and condition.op == "not":
        inner = truth(condition.expr, flags)
        return None if inner is None else not inner
    if isinstance(condition, OpExpr) and condition.op in ("and", "or"):
        return _connective(condition.op, truth(condition.left, flags), truth(condition.right, flags))
    if isinstance(condition, ComparisonExpr) and len(condition.operators) == 1:
        return _comparison(condition, flags)
    value = flag_read(condition, flags)
    return value if isinstance(value, bool) else None


def flag_read(expr: Expression, flags: Flags) -> FlagValue | None:
    """The value of the flag ``expr`` reads (a name or an attribute of a flag's name), if any."""
    if isinstance(expr, (NameExpr, MemberExpr)):
        return flags.get(expr.name)
    return None


def _connective(op: str, left: bool | None, right: bool | None) -> bool | None:
    deciding = op == "or"  # True decides an ``or``, False an ``and``
    if deciding in (left, right):
        return deciding
    if left is None or right is None:
        return None
    return not deciding


def _comparison(condition: ComparisonExpr, flags: Flags) -> bool | None:
    operator = condition.operators[0]
    if operator not in _EQUAL:
        return None
    left, right = condition.operands
    for flag_side, other in ((left, right), (right, left)):
        value, constant = flag_read(flag_side, flags), _constant(other)
        if value is not None and constant is not _UNKNOWN:
            same = value == constant and type(value) is type(constant)  # True is not 1 here
            return same if _EQUAL[operator] else not same
    return None


_UNKNOWN = object()


def _constant(expr: Expression) -> object:
    """The value a flag is compared with: a literal, or an enum member's name."""
    if isinstance(expr, (IntExpr, StrExpr)):
        return expr.value
    if isinstance(expr, NameExpr):
        return _CONSTANT_NAMES.get(expr.name, None if expr.name == "None" else _UNKNOWN)
    if isinstance(expr, MemberExpr) and isinstance(expr.expr, (NameExpr, MemberExpr)) and expr.expr.name[:1].isupper():
        return expr.name  # Mode.REDUCE_SCATTER, module.Mode.REDUCE_SCATTER: a class's member, not self.other
    return _UNKNOWN
