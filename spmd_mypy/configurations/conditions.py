"""What a condition is in one configuration: true, false, or undecided (None).

A flag is read where code tests it:

* by its name: a name (``sequence_parallel``, a parameter) or any attribute
  of that name (``self.sequence_parallel``, ``config.sequence_parallel``,
  ``self.config.tp_mode``, ``spmd.flags.sp``);
* through the module's assignments (:mod:`.following`): ``self.mode`` in a
  class whose methods set ``self.mode = config.tp_mode``, a local
  ``mode = self.tp_mode``, a parameter every call of its function passes
  the flag to;
* by its enum type, for a flag set to a member qualified by its class
  (``tp_mode = TensorParallelLinearMode.REDUCE_SCATTER``): any value compared
  with a member of that class, whatever it is called.

Decided, with three-valued logic (an undecided operand decides nothing that
its value could change):

* a boolean flag, ``not``, ``and``, ``or``;
* a flag compared by ``==``, ``!=``, ``is``, ``is not`` with a constant:
  ``True``/``False``/``None``, a number, a string, or an enum member
  (``Mode.REDUCE_SCATTER``, ``module.Mode.REDUCE_SCATTER``, or under the name
  the module imports the class as), which matches an unqualified flag whose
  value is the member's name (``mode = REDUCE_SCATTER``) and a qualified
  flag's member of the same class (a member of another class, or a literal,
  leaves a qualified flag undecided);
* any value that is no constant compared so with a member of a class a
  flag is declared by: the member that flag is set to.

Anything else (a call, a flag no configuration sets, ``in``) is undecided:
both branches are checked, as without configurations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Union

from mypy.nodes import (
    ComparisonExpr,
    Expression,
    IntExpr,
    MemberExpr,
    NameExpr,
    OpExpr,
    StrExpr,
    TypeInfo,
    UnaryExpr,
)

from spmd_mypy.configurations.declared import FlagValue, Member, by_enum_type, enum_member

Flags = Mapping[str, FlagValue]

_CONSTANT_NAMES = {"True": True, "False": False}
_EQUAL = {"==": True, "is": True, "!=": False, "is not": False}


def _nothing_followed(_expr: Expression) -> str | None:
    return None


@dataclass
class Place:
    """Where a condition is read: the configuration's flags, the flag each name or attribute holds there by
    assignment (:mod:`.following`), and the names the module imports classes under."""

    flags: Flags
    followed: Callable[[Expression], str | None] = _nothing_followed
    """The flag a name or attribute holds through the module's assignments, if any (not by its own name)."""
    class_names: Mapping[str, str] = field(default_factory=dict)
    """A name the module imports a class under -> the class's own name (``Mode`` -> ``TensorParallelLinearMode``)."""
    by_type: Mapping[str, Member] = field(init=False)
    """Each class a flag is declared by (its own name) -> the member the flag is set to."""

    def __post_init__(self) -> None:
        self.by_type = by_enum_type(dict(self.flags))

    def flag(self, expr: Expression) -> str | None:
        """The flag ``expr`` reads: by its name, else through an assignment."""
        if not isinstance(expr, (NameExpr, MemberExpr)):
            return None
        if expr.name in self.flags:
            return expr.name
        return self.followed(expr)

    def value(self, expr: Expression) -> FlagValue | None:
        """The value of the flag ``expr`` reads, if any."""
        flag = self.flag(expr)
        return None if flag is None else self.flags.get(flag)


def truth(condition: Expression, where: Flags | Place) -> bool | None:
    """Whether ``condition`` holds under the flags (``where``'s); None where they do not decide it."""
    place = where if isinstance(where, Place) else Place(where)
    if isinstance(condition, UnaryExpr) and condition.op == "not":
        inner = truth(condition.expr, place)
        return None if inner is None else not inner
    if isinstance(condition, OpExpr) and condition.op in ("and", "or"):
        return _connective(condition.op, truth(condition.left, place), truth(condition.right, place))
    if isinstance(condition, ComparisonExpr) and len(condition.operators) == 1:
        return _comparison(condition, place)
    value = place.value(condition)
    return value if isinstance(value, bool) else None


def _connective(op: str, left: bool | None, right: bool | None) -> bool | None:
    deciding = op == "or"  # True decides an ``or``, False an ``and``
    if deciding in (left, right):
        return deciding
    if left is None or right is None:
        return None
    return not deciding


def _comparison(condition: ComparisonExpr, place: Place) -> bool | None:
    operator = condition.operators[0]
    if operator not in _EQUAL:
        return None
    left, right = condition.operands
    sides = ((left, right), (right, left))
    for flag_side, other in sides:
        value, constant = place.value(flag_side), _constant(other, place)
        if value is not None and not isinstance(constant, _Unknown):
            same = same_value(value, constant)
            if same is not None:
                return same if _EQUAL[operator] else not same
    for value_side, other in sides:
        constant = _constant(other, place)
        if (isinstance(constant, WrittenMember) and constant.class_name in place.by_type
                and isinstance(_constant(value_side, place), _Unknown) and place.flag(value_side) is None):
            same = place.by_type[constant.class_name].name == constant.name
            return same if _EQUAL[operator] else not same
    return None


def same_value(value: FlagValue, constant: Constant) -> bool | None:
    """Whether a flag's value is the constant compared with; None where the comparison says nothing."""
    member = enum_member(value)
    if isinstance(constant, WrittenMember):
        if member is not None:
            return member.name == constant.name if member.class_name == constant.class_name else None
        return value == constant.name  # an unqualified name matches any class's member of that name
    if member is not None:
        return None  # a qualified member compared with a literal (a StrEnum's may equal a string)
    return value == constant and type(value) is type(constant)  # True is not 1 here


@dataclass(frozen=True)
class WrittenMember:
    """An enum member as written: its class's own name (imports resolved) and its name."""

    class_name: str
    name: str


class _Unknown:
    """What a flag is compared with where it is no constant."""


_UNKNOWN = _Unknown()
Constant = Union[bool, int, str, None, WrittenMember]


def literal_constant(expr: Expression) -> Constant | None:
    """The value a literal a flag may take writes: ``True``/``False``, a number, a string, an enum member
    (its class as the analysed tree resolves it); None for anything else (``None`` included)."""
    names: dict[str, str] = {}
    if isinstance(expr, MemberExpr):
        owner = expr.expr
        if not (isinstance(owner, (NameExpr, MemberExpr)) and isinstance(owner.node, TypeInfo) and owner.node.is_enum):
            return None  # ``self.other``, ``config.mode``: a value, not a member
        names[owner.name] = owner.node.name
    constant = _constant(expr, Place({}, class_names=names))
    return None if isinstance(constant, _Unknown) else constant


def _constant(expr: Expression, place: Place) -> Constant | _Unknown:
    """The value a flag is compared with: a literal, or an enum member; ``_UNKNOWN`` for anything else."""
    if isinstance(expr, (IntExpr, StrExpr)):
        return expr.value
    if isinstance(expr, NameExpr):
        return _CONSTANT_NAMES.get(expr.name, None if expr.name == "None" else _UNKNOWN)
    if isinstance(expr, MemberExpr) and isinstance(owner := expr.expr, (NameExpr, MemberExpr)):
        # Mode.REDUCE_SCATTER, module.Mode.REDUCE_SCATTER, an imported alias's: a class's member, not self.other
        name = place.class_names.get(owner.name, owner.name) if isinstance(owner, NameExpr) else owner.name
        if name[:1].isupper() or name in place.by_type:
            return WrittenMember(name, expr.name)
    return _UNKNOWN
