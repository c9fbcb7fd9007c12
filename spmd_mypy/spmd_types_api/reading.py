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
* ``get_partition_spec(x)`` is x's known shards (an axis x's type does not
  know may shard a dim too); ``PartitionSpec(spec[1], spec[0])`` takes dim
  ``k``'s entry from it where every shard dim is known and not negative;
  ``None if spec is None else E`` is ``E`` where x is known to be sharded
  (its spec is never None), else the shards both branches give, one that
  only one branch gives read as V (the local type both agree on);
* a name is followed to its one assignment in the same function (or at
  module level), with the item assignments ``t[axis] = T`` after it in the
  same block and before the read applied in order; any other change of the
  name, or one in another block, leaves it unknown;
* a dict with a key that cannot be read is unknown as a whole (that key may
  replace any other).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from mypy.checker import TypeChecker
from mypy.nodes import (
    AssignmentStmt,
    CallExpr,
    ComparisonExpr,
    ConditionalExpr,
    DictExpr,
    Expression,
    FuncItem,
    IndexExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    RefExpr,
    StrExpr,
    TupleExpr,
    TypeInfo,
    Var,
)
from mypy.plugin import FunctionContext, MethodContext
from mypy.types import Instance, LiteralType, get_proper_type

from spmd_mypy.call_arguments import int_value
from spmd_mypy.config import AxisNames, Config
from spmd_mypy.groups import axis_of_group
from spmd_mypy.representation import local_form, spmd_members
from spmd_mypy.spmd_types_api.assignments import definition, item_assignment, single_value
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
GET_PARTITION_SPEC = "spmd_types.runtime.get_partition_spec"
_FOLLOW_DEPTH = 4
"""How many assignments a name is followed through (``t = dict(q_local)`` after ``q_local = ...`` is two)."""


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


def like_type(source: Expression, overrides: Expression | None, site: Site, with_shards: bool) -> TensorType | None:
    """What ``assert_type_like(x, source, overrides)`` asserts: source's known type (its local type alone
    without ``with_shards``, as ``assert_local_type_like``), each axis ``overrides`` names set to its type
    there (one whose type is not read, or a shard, which spmd_types refuses there: left out); None where
    source's type is not known or ``overrides`` is not read (it may name any axis)."""
    known = _known_type(source, site)
    if known is None:
        return None
    axes = dict((known if with_shards else local_form(known)).axes)
    if overrides is not None and not (isinstance(overrides, NameExpr) and overrides.fullname == "builtins.None"):
        written = _read(overrides, site, _FOLLOW_DEPTH)
        if written.unread_axes or written.bare is not None or written.shards:
            return None
        for axis, typ in written.axes.items():
            if typ is None or typ.shard is not None:
                axes.pop(axis, None)
            else:
                axes[axis] = typ
    return TensorType.of(axes) if axes else None


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
    if isinstance(expr, ConditionalExpr):
        return _conditional(expr, site, depth)
    if isinstance(expr, CallExpr) and isinstance(expr.callee, RefExpr):
        callee = expr.callee.fullname
        if callee == _PARTITION_SPEC:
            return _partition_spec(expr, site, depth)
        if callee == GET_LOCAL_TYPE and len(expr.args) == 1:
            return _type_of(expr.args[0], site)
        if callee == GET_PARTITION_SPEC and len(expr.args) == 1:
            return _spec_of(expr.args[0], site)
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
        copied = _entry_of_spec(entry, site, depth) if isinstance(entry, IndexExpr) else None
        if copied is not None:
            reading.unread_axes = True  # an axis the spec's tensor does not know may shard that dim too
            reading.shards.update(shard_group(Shard(dim), copied) if copied else [])
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
    known = _known_type(tensor, site)
    if known is None:
        return _UNREADABLE
    return _Reading(axes=dict(local_form(known).axes), unread_axes=True)


def _spec_of(tensor: Expression, site: Site) -> _Reading:
    """``get_partition_spec(tensor)``: its known shards; an axis it does not know may shard a dim too."""
    known = _known_type(tensor, site)
    if known is None:
        return _UNREADABLE
    return _Reading(shards={axis: typ for axis, typ in known.axes if typ.shard is not None}, unread_axes=True)


def _known_type(tensor: Expression, site: Site) -> TensorType | None:
    """``tensor``'s SPMD type where mypy inferred one known type for it."""
    inferred = site.checker.lookup_type_or_none(tensor)
    found = set(spmd_members(inferred)) if inferred is not None else {None}
    return found.pop() if len(found) == 1 else None


def _spec_tensor(expr: Expression, site: Site, depth: int) -> Expression | None:
    """The tensor ``expr`` holds the partition spec of: ``get_partition_spec(t)``, or a name assigned it."""
    if isinstance(expr, NameExpr) and depth > 0:
        value = single_value(expr, site)
        return _spec_tensor(value, site, depth - 1) if value is not None else None
    if (isinstance(expr, CallExpr) and isinstance(expr.callee, RefExpr) and expr.callee.fullname == GET_PARTITION_SPEC
            and len(expr.args) == 1):
        return expr.args[0]
    return None


def _entry_of_spec(entry: IndexExpr, site: Site, depth: int) -> list[str] | None:
    """``spec[k]`` of a ``get_partition_spec(t)``: the axes t is known to shard dim ``k`` by, major first; none
    where a shard dim is negative (which dim it is depends on the rank) or ``k`` is not a literal of at least 0.
    None where ``spec`` is not known to be a partition spec."""
    tensor = _spec_tensor(entry.base, site, depth)
    if tensor is None:
        return None
    known = _known_type(tensor, site)
    dim = int_value(entry.index)
    if known is None or dim is None or dim < 0:
        return []
    shards = [(axis, typ) for axis, typ in known.axes if typ.shard is not None]
    if any(typ.shard is not None and typ.shard < 0 for _, typ in shards):
        return []
    on_dim = sorted((typ.order or 0, axis) for axis, typ in shards if typ.shard == dim)
    return [axis for _, axis in on_dim]


def _conditional(expr: ConditionalExpr, site: Site, depth: int) -> _Reading:
    """``None if spec is None else E`` (torchtitan's guard of a spec derived from ``get_partition_spec``):
    the branch that runs where ``spec``'s tensor is known to be sharded; else what both branches say, a shard
    only one of them gives read as V (the local type both agree on)."""
    taken = _branch_taken(expr, site, depth)
    if taken is not None:
        return _read(taken, site, depth)
    first, second = _read(expr.if_expr, site, depth), _read(expr.else_expr, site, depth)
    if (first.axes, first.bare) != (second.axes, second.bare):
        return _UNREADABLE

    def either(axis: str) -> AxisType | None:
        one, other = first.shards.get(axis, Varying), second.shards.get(axis, Varying)
        return one if one == other else Varying if one is not None and other is not None else None

    return _Reading(axes=first.axes, shards={axis: either(axis) for axis in {*first.shards, *second.shards}},
                    bare=first.bare, unread_axes=first.unread_axes or second.unread_axes)


def _branch_taken(expr: ConditionalExpr, site: Site, depth: int) -> Expression | None:
    """The branch of ``... if spec is [not] None else ...`` that runs where ``spec`` is the partition spec of a
    tensor with a known shard (a spec, never None); None where that is not known."""
    test = expr.cond
    if not (isinstance(test, ComparisonExpr) and test.operators in (["is"], ["is not"])
            and isinstance(test.operands[1], NameExpr) and test.operands[1].fullname == "builtins.None"):
        return None
    tensor = _spec_tensor(test.operands[0], site, depth)
    known = _known_type(tensor, site) if tensor is not None else None
    if known is None or all(typ.shard is None for _, typ in known.axes):
        return None
    return expr.else_expr if test.operators == ["is"] else expr.if_expr


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
        dim = int_value(expr.args[0]) if len(expr.args) == 1 and not expr.arg_names[0] else None
        return Shard(dim) if dim is not None else Varying
    if isinstance(expr, NameExpr) and depth > 0:
        value = single_value(expr, site)
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
        value = single_value(expr, site)
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


# --------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------


def _followed(name: NameExpr, site: Site, depth: int) -> _Reading:
    """A name holding a type: its one assignment, then its item assignments before the read."""
    found = definition(name, site)
    if found is None:
        return _UNREADABLE
    block, index = found
    value = block.body[index]
    assert isinstance(value, AssignmentStmt)
    reading = _read(value.rvalue, site, depth)
    for statement in block.body[index + 1:]:
        if statement.line >= site.line:
            break
        item = item_assignment(statement, name.name)
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
