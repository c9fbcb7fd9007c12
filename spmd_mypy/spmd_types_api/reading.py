"""What a spmd_types type expression says, in the checker's types (docs/spec.md#spmd_types-vocabulary).

spmd_types (the runtime checker torchtitan writes its types with) spells a
tensor's type as data: ``{"dp": spmd.P, "tp": spmd.I}``, a bare ``spmd.V``
(every axis of the current mesh), ``spmd.PartitionSpec("dp", None)``,
``spmd.get_local_type(x)``, and any list of these merged.  The functions
here read such an expression, where it is written, into a
:class:`~spmd_stubs.core.TensorType`; what cannot be known statically is
left out, never guessed:

* an axis is a string literal, a ``StrEnum`` member (its value, read from
  the enum's class body), or a process group whose axis
  :func:`spmd_mypy.groups.axis_of_group` names;
* a type is ``spmd.R``/``I``/``V``/``P`` (or their long names) or
  ``spmd.S(k)``: ``S`` of a non-literal dim is a shard whose dim is unknown,
  that is ``V`` (its local type);
* a bare type is that type on each axis of ``[spmd_mypy] current_mesh``
  that no other argument names; without the setting, or where an argument
  that may name axes is unreadable, it says nothing;
* ``PartitionSpec(a, (b, c), None)`` shards dim 0 over ``a``, dim 1 over
  ``b`` then ``c`` (``S(1)@(b,c)``);
* ``get_local_type(x)`` is x's known type with shard dims forgotten (what
  spmd_types stores as the local type); ``dict(...)`` and ``{**...}`` copy it;
* a name is followed to its one assignment in the same function (or at
  module level), with the item assignments ``t[axis] = T`` after it in the
  same block and before the read applied in order; any other change of the
  name, or one in another block, leaves it unknown;
* a dict with a key that cannot be read is unknown as a whole (that key may
  replace any other).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Sequence

from mypy.checker import TypeChecker
from mypy.nodes import (
    GDEF,
    LDEF,
    AssignmentStmt,
    Block,
    CallExpr,
    DelStmt,
    DictExpr,
    Expression,
    ExpressionStmt,
    FuncItem,
    IndexExpr,
    IntExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    OperatorAssignmentStmt,
    RefExpr,
    Statement,
    StrExpr,
    TupleExpr,
    TypeInfo,
    UnaryExpr,
    Var,
)
from mypy.plugin import FunctionContext, MethodContext
from mypy.types import Instance, LiteralType, get_proper_type

from spmd_mypy.config import AxisNames, Config
from spmd_mypy.groups import axis_of_group
from spmd_mypy.representation import local_form, spmd_members
from spmd_mypy.statements import names_bound_by, nested_blocks
from spmd_stubs.core import AxisType, Invariant, Partial, Replicate, Shard, TensorType, Varying, shard_group

_TYPES = "spmd_types.types."
_LOCAL_TYPES = {
    **{f"{_TYPES}{name}": axis_type for name, axis_type in
       (("R", Replicate), ("I", Invariant), ("V", Varying), ("P", Partial),
        ("Replicate", Replicate), ("Invariant", Invariant), ("Varying", Varying), ("Partial", Partial))},
    **{f"{_TYPES}PerMeshAxisLocalSpmdType.{name}": axis_type for name, axis_type in
       (("R", Replicate), ("I", Invariant), ("V", Varying), ("P", Partial))},
}
"""spmd_types' per-axis local types by the full name mypy resolves ``spmd.R`` to."""
_SHARD = (f"{_TYPES}S", f"{_TYPES}Shard")
_PARTITION_SPEC = f"{_TYPES}PartitionSpec"
GET_LOCAL_TYPE = "spmd_types._type_attr.get_local_type"
_FOLLOW_DEPTH = 4
"""How many assignments a name is followed through (``t = dict(q_local)`` after ``q_local = ...`` is two)."""
_MUTATORS = frozenset({"update", "pop", "popitem", "setdefault", "clear", "__setitem__", "__delitem__"})


@dataclass(frozen=True)
class Site:
    """Where a spmd_types expression is read: the checker (types of what it already inferred), the module and
    the function it is written in (None: module level), the settings, and its line (a later item assignment
    is not applied)."""

    checker: TypeChecker
    tree: MypyFile
    function: FuncItem | None
    groups: AxisNames
    current_mesh: tuple[str, ...]
    line: int


def site_of(ctx: FunctionContext | MethodContext, settings: Config) -> Site | None:
    """The site of a hooked call (None where mypy's checker does not run it: no types to read)."""
    checker = ctx.api
    if not isinstance(checker, TypeChecker):
        return None
    return Site(checker, checker.tree, checker.scope.current_function(), settings.groups, settings.current_mesh,
                ctx.context.line)


def axis_name(expr: Expression, site: Site) -> str | None:
    """The mesh axis ``expr`` names (``"tp"``, ``MeshAxisName.TP``, a process group); None where unknown."""
    return _axis_name(expr, site, _FOLLOW_DEPTH)


def axis_type(expr: Expression, site: Site) -> AxisType | None:
    """The per-axis type ``expr`` is (``spmd.I``, ``spmd.S(0)``; ``S(n)`` of a non-literal ``n`` is V); None
    where unknown."""
    return _axis_type(expr, site, _FOLLOW_DEPTH)


def tensor_type(expressions: Sequence[Expression], site: Site) -> TensorType | None:
    """The type spmd_types' ``merge_types(*expressions)`` gives, as far as it is known statically: each
    argument a dict, a bare type, a ``PartitionSpec``, ``None`` or a name holding one (module docstring).
    An axis the arguments disagree on is left out (spmd_types raises there); None where no axis is known."""
    merged = _Merged()
    for expr in expressions:
        merged.add(_read(expr, site, _FOLLOW_DEPTH))
    known = merged.result(site.current_mesh)
    return TensorType.of(known) if known else None


# --------------------------------------------------------------------------
# One argument
# --------------------------------------------------------------------------


@dataclass
class _Reading:
    """What one argument says: per-axis types (None: the axis is named, its type unknown), shards from a
    partition spec, a bare type, and whether it may name axes not read (then a bare type fills nothing)."""

    axes: dict[str, AxisType | None] = field(default_factory=dict)
    shards: dict[str, AxisType | None] = field(default_factory=dict)
    bare: AxisType | None = None
    unread_axes: bool = False


_UNREADABLE = _Reading(unread_axes=True)


@dataclass
class _Merged:
    axes: dict[str, AxisType | None] = field(default_factory=dict)
    shards: dict[str, AxisType | None] = field(default_factory=dict)
    bare: list[AxisType] = field(default_factory=list)
    unread_axes: bool = False

    def add(self, reading: _Reading) -> None:
        for mine, theirs in ((self.axes, reading.axes), (self.shards, reading.shards)):
            for axis, typ in theirs.items():
                mine[axis] = typ if axis not in mine or mine[axis] == typ else None
        self.bare += [reading.bare] if reading.bare is not None else []
        self.unread_axes |= reading.unread_axes

    def result(self, current_mesh: tuple[str, ...]) -> dict[str, AxisType]:
        known = dict(self.axes)
        for axis, shard in self.shards.items():
            written = known.get(axis, Varying)
            known[axis] = shard if written is not None and written.local == Varying else None
        if len(self.bare) == 1 and not self.unread_axes:
            known.update({axis: self.bare[0] for axis in current_mesh if axis not in known})
        return {axis: typ for axis, typ in known.items() if typ is not None}


def _read(expr: Expression, site: Site, depth: int) -> _Reading:
    if isinstance(expr, NameExpr) and expr.fullname == "builtins.None":
        return _Reading()
    local = _local_type(expr)
    if local is not None:
        return _Reading(bare=local)
    if isinstance(expr, DictExpr):
        return _dict(expr, site, depth)
    if isinstance(expr, CallExpr) and isinstance(expr.callee, RefExpr):
        callee = expr.callee.fullname
        if callee == _PARTITION_SPEC:
            return _partition_spec(expr, site, depth)
        if callee == GET_LOCAL_TYPE and len(expr.args) == 1:
            return _type_of(expr.args[0], site)
        if callee == "builtins.dict" and len(expr.args) == 1 and not expr.arg_names[0]:
            return _read(expr.args[0], site, depth)
    if isinstance(expr, NameExpr) and depth > 0:
        return _followed(expr, site, depth - 1)
    return _UNREADABLE


def _dict(expr: DictExpr, site: Site, depth: int) -> _Reading:
    reading = _Reading()
    for key, value in expr.items:
        if key is None:  # {**spread}
            spread = _read(value, site, depth)
            if spread.bare is not None or spread.shards:
                return _UNREADABLE
            reading.axes.update(spread.axes)
            reading.unread_axes |= spread.unread_axes
            continue
        axis = _axis_name(key, site, depth)
        if axis is None:
            return _UNREADABLE
        reading.axes[axis] = _axis_type(value, site, depth)
    return reading


def _partition_spec(call: CallExpr, site: Site, depth: int) -> _Reading:
    reading = _Reading()
    if any(kind.is_star() or name for kind, name in zip(call.arg_kinds, call.arg_names)):
        return _UNREADABLE
    for dim, entry in enumerate(call.args):
        if isinstance(entry, NameExpr) and entry.fullname == "builtins.None":
            continue
        group = entry.items if isinstance(entry, TupleExpr) else [entry]
        axes = [_axis_name(item, site, depth) for item in group]
        named = [axis for axis in axes if axis is not None]
        if len(named) < len(axes) or len(set(named)) < len(named) or not named:
            reading.unread_axes = True
            continue
        reading.shards.update(shard_group(Shard(dim), named))
    return reading


def _type_of(tensor: Expression, site: Site) -> _Reading:
    """``get_local_type(tensor)``: its known local type; every axis it does not know may be named."""
    inferred = site.checker.lookup_type_or_none(tensor)
    found = set(spmd_members(inferred)) if inferred is not None else {None}
    known = found.pop() if len(found) == 1 else None
    if known is None:
        return _UNREADABLE
    return _Reading(axes=dict(local_form(known).axes), unread_axes=True)


# --------------------------------------------------------------------------
# Axes and per-axis types
# --------------------------------------------------------------------------


def _local_type(expr: Expression) -> AxisType | None:
    return _LOCAL_TYPES.get(expr.fullname) if isinstance(expr, RefExpr) else None


def _axis_type(expr: Expression, site: Site, depth: int) -> AxisType | None:
    local = _local_type(expr)
    if local is not None:
        return local
    if isinstance(expr, CallExpr) and isinstance(expr.callee, RefExpr) and expr.callee.fullname in _SHARD:
        dim = _int_literal(expr.args[0]) if len(expr.args) == 1 and not expr.arg_names[0] else None
        return Shard(dim) if dim is not None else Varying
    if isinstance(expr, NameExpr) and depth > 0:
        value = _single_value(expr, site)
        return _axis_type(value, site, depth - 1) if value is not None else None
    return None


def _axis_name(expr: Expression, site: Site, depth: int) -> str | None:
    if isinstance(expr, StrExpr):
        return expr.value if expr.value.isidentifier() else None
    member = _enum_value(expr)
    if member is not None:
        return member
    inferred = site.checker.lookup_type_or_none(expr)
    group = axis_of_group(expr, site.groups, site.tree, inferred, site.function)
    if group is not None:
        return group
    if isinstance(expr, NameExpr) and depth > 0:
        value = _single_value(expr, site)
        return _axis_name(value, site, depth - 1) if value is not None else None
    return None


def _enum_value(expr: Expression) -> str | None:
    """``MeshAxisName.TP`` -> ``"tp"``: the string literal its class assigns the member (``auto()`` in a
    ``StrEnum``: the name lower-cased), as mypy typed the member (a module read from the cache keeps no
    class body)."""
    if not (isinstance(expr, MemberExpr) and isinstance(expr.expr, RefExpr) and isinstance(expr.expr.node, TypeInfo)):
        return None
    info = expr.expr.node
    member = info.get(expr.name)
    if not info.is_enum or member is None or not isinstance(member.node, Var) or member.node.type is None:
        return None
    assigned = get_proper_type(member.node.type)
    if isinstance(assigned, Instance) and assigned.last_known_value is not None:
        assigned = assigned.last_known_value
    if isinstance(assigned, LiteralType) and isinstance(assigned.value, str):
        return assigned.value
    auto = isinstance(assigned, Instance) and assigned.type.fullname == "enum.auto"
    return expr.name.lower() if auto and info.has_base("enum.StrEnum") else None


def _int_literal(expr: Expression) -> int | None:
    if isinstance(expr, IntExpr):
        return expr.value
    if isinstance(expr, UnaryExpr) and expr.op == "-" and isinstance(expr.expr, IntExpr):
        return -expr.expr.value
    return None


# --------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------


def _followed(name: NameExpr, site: Site, depth: int) -> _Reading:
    """A name holding a type: its one assignment, then its item assignments before the read."""
    found = _definition(name, site)
    if found is None:
        return _UNREADABLE
    block, index = found
    value = block.body[index]
    assert isinstance(value, AssignmentStmt)
    reading = _read(value.rvalue, site, depth)
    for statement in block.body[index + 1:]:
        if statement.line >= site.line:
            break
        item = _item_assignment(statement, name.name)
        if item is None:
            continue
        if reading.bare is not None or reading.shards:
            return _UNREADABLE
        axis = _axis_name(item.index, site, depth)
        if axis is None:
            return _UNREADABLE
        assigned = statement.rvalue if isinstance(statement, AssignmentStmt) else None
        reading.axes[axis] = _axis_type(assigned, site, depth) if assigned is not None else None
    return reading


def _single_value(name: NameExpr, site: Site) -> Expression | None:
    """What ``name`` holds where it is read: its one assignment's value, where nothing changes it after."""
    found = _definition(name, site)
    if found is None:
        return None
    block, index = found
    if any(_item_assignment(statement, name.name) is not None for statement in block.body[index + 1:]):
        return None
    statement = block.body[index]
    assert isinstance(statement, AssignmentStmt)
    return statement.rvalue


def _definition(name: NameExpr, site: Site) -> tuple[Block, int] | None:
    """The block and index of the one assignment ``name = value`` in the scope that holds ``name`` (the
    function read in, or the module for a global, which nothing may change after), before the read; None
    where it has several, none, another kind of binding, or a change outside that block."""
    if not isinstance(name.node, Var):
        return None
    function = site.function if name.kind == LDEF else None
    if name.kind not in (LDEF, GDEF) or (function is None and name.kind == LDEF):
        return None
    if function is not None and any(argument.variable.name == name.name for argument in function.arguments):
        return None
    top = function.body if function is not None else Block(list(site.tree.defs))
    found: list[tuple[Block, int]] = []
    changed: list[tuple[Block, int]] = []
    for block in _blocks(top):
        for index, statement in enumerate(block.body):
            if _binds(statement, name.name):
                if not (isinstance(statement, AssignmentStmt) and len(statement.lvalues) == 1
                        and isinstance(statement.lvalues[0], NameExpr)):
                    return None
                found.append((block, index))
            elif _changes(statement, name.name):
                changed.append((block, index))
    if len(found) != 1:
        return None
    block, index = found[0]
    if function is None:
        return found[0] if not changed else None
    in_order = all(where is block and after > index for where, after in changed)
    return found[0] if in_order and block.body[index].line < site.line else None


def _blocks(block: Block) -> Iterator[Block]:
    """``block`` and every block nested in it, in the same scope."""
    yield block
    for statement in block.body:
        for nested in nested_blocks(statement):
            yield from _blocks(nested)


def _binds(statement: Statement, name: str) -> bool:
    if isinstance(statement, AssignmentStmt):
        return any(name in names_bound_by(target) for target in statement.lvalues)
    return any(name in names_bound_by(target) for target in _other_targets(statement))


def _other_targets(statement: Statement) -> list[Expression]:
    index = getattr(statement, "index", None)
    targets = getattr(statement, "target", None)
    return [*([index] if isinstance(index, Expression) else []),
            *(t for t in (targets if isinstance(targets, list) else []) if isinstance(t, Expression))]


def _changes(statement: Statement, name: str) -> bool:
    """An item assignment to ``name`` or a call of one of its mutating methods."""
    if _item_assignment(statement, name) is not None:
        return True
    call = statement.expr if isinstance(statement, ExpressionStmt) else None
    return (isinstance(call, CallExpr) and isinstance(call.callee, MemberExpr) and call.callee.name in _MUTATORS
            and isinstance(call.callee.expr, NameExpr) and call.callee.expr.name == name)


def _item_assignment(statement: Statement, name: str) -> IndexExpr | None:
    """The target ``name[key]`` of ``name[key] = value``, ``name[key] += value`` or ``del name[key]``."""
    if isinstance(statement, AssignmentStmt):
        targets: list[Expression] = statement.lvalues
    elif isinstance(statement, OperatorAssignmentStmt):
        targets = [statement.lvalue]
    elif isinstance(statement, DelStmt):
        targets = [statement.expr]
    else:
        targets = []
    for target in targets:
        if isinstance(target, IndexExpr) and isinstance(target.base, NameExpr) and target.base.name == name:
            return target
    return None
