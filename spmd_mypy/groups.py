"""Which mesh axis a process-group expression (a collective's ``group=``) stands for.

A group names an axis, for certain, where

* its type says so: ``Group[tp]`` (:mod:`spmd_mypy.group_types`), written
  by the user or carried by mypy from one of the calls below;
* the user declared it in ``[spmd_mypy] groups``
  (:class:`~spmd_mypy.config.AxisNames`): a call of a declared
  function (``get_tensor_model_parallel_group()``, whatever its arguments)
  or a declared attribute (``*.tp_group`` covers ``self.tp_group``, and
  also a variable or parameter ``tp_group``);
* a DeviceMesh looks it up by a literal name: ``mesh.get_group("tp")``,
  ``mesh.get_group(mesh_dim="tp")``, ``mesh["tp"].get_group()``;
* it is ``spmd.group_of(tp)``;
* it is named for an axis the function's signature mentions (``tp_group``,
  ``tp_pg``: an underscore-separated part is the axis, another ``group`` or
  ``pg``), as an attribute or a variable;
* it is followed to one of these (:func:`followed`): a local variable every
  assignment of which names the same axis (``group =
  get_tensor_model_parallel_group()``), an attribute of an autograd
  Function's ``ctx`` or of ``self`` every assignment of which in the class
  does (``ctx.group = group`` in ``forward``, read in ``backward``), a
  parameter by its declared type, else by what every call of its function
  in the module passes it (``Fn.apply(x, tp_group)``).

Anything else names no axis: a parameter typed ``ProcessGroup`` that no
call in the module passes a group naming an axis, a
flattened ``group_of((dp, cp))``, a mesh dim given by number.
"""

from __future__ import annotations

from typing import Callable, Iterator

from mypy.nodes import (
    ARG_NAMED,
    ARG_POS,
    AssignmentStmt,
    Block,
    CallExpr,
    ComparisonExpr,
    Decorator,
    Expression,
    FuncBase,
    FuncDef,
    FuncItem,
    IfStmt,
    Import,
    ImportFrom,
    IndexExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    RefExpr,
    Statement,
    StrExpr,
    Var,
)
from mypy.plugin import FunctionContext, MethodContext
from mypy.server.subexpr import get_subexpressions
from mypy.types import CallableType, Type
from mypy.util import correct_relative_import

from spmd_mypy.annotations import axes_of
from spmd_mypy.config import AxisNames
from spmd_mypy.fullnames import CALLED_VALUE, GROUP_OF
from spmd_mypy.group_types import axis_of_type, typed_group
from spmd_mypy.representation import typed_tensors_in
from spmd_mypy.statements import class_of, functions_in, nested_blocks
from spmd_mypy.wrappers import marked

__all__ = ["axis_of_group", "declaration_for", "followed", "group_axis", "group_call_hook", "group_of_hook",
           "mesh_group_hook", "named_for", "passed_to"]

_MESH_DIM = "mesh_dim"
_GROUP_WORDS = frozenset({"group", "pg"})
_FOLLOW_DEPTH = 4
"""How many assignments a group is followed through (``group = ctx.group`` in ``backward`` is two)."""


def axis_of_group(group: Expression, declared: AxisNames, tree: MypyFile, group_type: Type | None = None,
                  scope: FuncItem | None = None) -> str | None:
    """The mesh axis ``group`` (an expression of the module ``tree``, of type ``group_type``, in the function
    ``scope``) stands for; None where no rule names one."""
    known = axis_of_type(group_type) or named_axis(group, declared, tree)
    if known is not None or scope is None:
        return known

    def names(expr: Expression) -> str | None:
        named = named_axis(expr, declared, tree)
        if named is None and isinstance(expr, (NameExpr, MemberExpr)):
            return named_for(expr.name, scope, _GROUP_WORDS)
        return named

    return names(group) or followed(group, scope, names, tree)


def named_for(name: str, function: FuncItem, words: frozenset[str]) -> str | None:
    """The axis ``name`` is named for (``tp_group``, ``tp_world_size``: one underscore-separated part an axis
    ``function``'s signature mentions, another one of ``words``); None where it names none or several."""
    parts = set(name.lower().split("_"))
    signature = function.type
    if not parts & words or not isinstance(signature, CallableType):
        return None
    mentioned = {axis for typ in (*signature.arg_types, signature.ret_type)
                 for tensor_type in typed_tensors_in(typ) for axis, _ in tensor_type.axes}
    named = mentioned & parts
    return named.pop() if len(named) == 1 else None


def group_axis(ctx: FunctionContext, group: tuple[Expression, Type], declared: AxisNames) -> str | None:
    """:func:`axis_of_group` for a call's ``group=`` argument (its expression and type), in the function the
    call is in."""
    scope = ctx.api.scope.current_function()  # type: ignore[attr-defined]
    return axis_of_group(group[0], declared, ctx.api.tree, group[1], scope)  # type: ignore[attr-defined]


def named_axis(group: Expression, declared: AxisNames, tree: MypyFile) -> str | None:
    """The axis ``group`` names by itself: a declared attribute or function, a mesh lookup, ``group_of``."""
    group = _unwrapped(group)
    if isinstance(group, (MemberExpr, NameExpr)):
        return declared.of_attribute(group.name)
    if not isinstance(group, CallExpr):
        return None
    function = function_name(group.callee, tree)
    declared_axis = declared.of_function(function) if function is not None else None
    return declared_axis or _mesh_lookup(group) or _group_of(group)


def followed(expr: Expression, scope: FuncItem, names: Callable[[Expression], str | None], tree: MypyFile | None = None,
             depth: int = _FOLLOW_DEPTH) -> str | None:
    """The axis ``expr`` (in the function ``scope`` of the module ``tree``) has by what is assigned to it
    (module docstring).

    ``names`` says what an expression names by itself.  Every source must
    name the same axis: an assignment that names none (``group =
    new_group(ranks)``) leaves the name unknown.  A parameter's first
    source is its declared type, else what every call in ``tree`` passes it
    (:func:`passed_to`).  A source that leads back to a name being followed
    adds nothing: a Function whose ``backward`` applies it again with
    ``ctx.group``, which ``forward`` set from its ``group`` (Megatron's
    ``_AllToAll``).
    """
    axes = _source_axes(expr, scope, names, tree, depth, frozenset())
    return axes.pop() if len(axes) == 1 else None


def _source_axes(expr: Expression, scope: FuncItem, names: Callable[[Expression], str | None], tree: MypyFile | None,
                 depth: int, following: frozenset[tuple[int, str]]) -> set[str | None]:
    """:func:`followed`'s axes of every source of ``expr`` (None: a source naming none), less those of sources
    that lead back to one of ``following``."""
    if depth == 0:
        return {None}
    following = following | {_followed_key(expr, scope)}
    axes: set[str | None] = set()
    if isinstance(expr, NameExpr) and isinstance(expr.node, Var):
        sources: list[tuple[Expression, FuncItem | None]] = [
            (rvalue, scope) for rvalue in _assigned(scope, lambda target: isinstance(target, NameExpr)
                                                    and target.name == expr.name)]
        if _is_parameter(scope, expr.name):
            declared = _declared_parameter(scope, expr.name)
            if declared is not None:
                axes.add(declared)
            else:
                passed = passed_to(scope, expr.name, tree) if tree is not None else []
                if not passed:
                    return {None}
                sources += passed
    elif isinstance(expr, MemberExpr) and isinstance(expr.expr, NameExpr) and _owner_argument(scope, expr.expr.name):
        sources = [(rvalue, method) for method in _methods(scope)
                   for rvalue in _assigned(method, lambda target: _is_attribute(target, method, expr.name))]
    else:
        return {None}
    for value, where in sources:
        named = names(value)
        if named is not None or where is None:
            axes.add(named)
        elif _followed_key(value, where) not in following:
            axes |= _source_axes(value, where, names, tree, depth - 1, following)
    return axes


def _followed_key(expr: Expression, scope: FuncItem) -> tuple[int, str]:
    """What :func:`followed` follows: a name in its function, an attribute in its class (any other expression
    is followed nowhere, so its key, unique to it, never recurs)."""
    if isinstance(expr, MemberExpr):
        return id(class_of(scope)), f".{expr.name}"
    return (id(scope), expr.name) if isinstance(expr, NameExpr) else (id(expr), "")


def passed_to(function: FuncItem, name: str, tree: MypyFile) -> list[tuple[Expression, FuncItem | None]]:
    """What every call of ``function`` in ``tree`` passes its parameter ``name``, each with the function the
    call is in (None at module level): ``f(x, g)``, ``Fn.apply(x, g)`` for a Function's ``forward``,
    ``self.f(x, g)`` in its class.  Empty where a call leaves it to its default, or where there is no call."""
    index = next(i for i, argument in enumerate(function.arguments) if argument.variable.name == name)
    innermost_first = [found.node for found in reversed(list(functions_in(tree.defs)))]
    seen: set[int] = set()
    passed: list[tuple[Expression, FuncItem | None]] = []
    for scope, node in [*((f, f) for f in innermost_first), (None, tree)]:
        for call in get_subexpressions(node):
            if not isinstance(call, CallExpr) or id(call) in seen:
                continue
            seen.add(id(call))
            skipped = _parameters_not_passed(call, function, scope)
            if skipped is None:
                continue
            argument = _argument(call, index - skipped, name)
            if argument is None:
                return []
            passed.append((argument, scope))
    return passed


def _parameters_not_passed(call: CallExpr, function: FuncItem, scope: FuncItem | None) -> int | None:
    """How many leading parameters of ``function`` a ``call`` of it (in ``scope``) leaves out (``self``,
    ``ctx``); None where ``call`` does not call ``function``."""
    callee = call.callee
    node = callee.node if isinstance(callee, RefExpr) else None
    if (isinstance(node, FuncDef) and node is function) or (isinstance(node, Decorator) and node.func is function):
        return 0
    if not isinstance(callee, MemberExpr):
        return None
    owner = class_of(function)
    receiver = callee.expr.node if isinstance(callee.expr, RefExpr) else None
    if callee.name == "apply" and function.name == "forward" and owner is not None and receiver is owner:
        return 1
    on_self = (isinstance(callee.expr, NameExpr) and callee.expr.name == "self" and scope is not None
               and class_of(scope) is owner)
    return 1 if on_self and callee.name == function.name and owner is not None else None


def _argument(call: CallExpr, position: int, name: str) -> Expression | None:
    """The argument ``call`` passes to the parameter at ``position`` named ``name``; None where it passes none."""
    for index, (argument, kind, keyword) in enumerate(zip(call.args, call.arg_kinds, call.arg_names)):
        if (kind == ARG_POS and index == position) or (kind == ARG_NAMED and keyword == name):
            return argument
    return None


def _is_parameter(function: FuncItem, name: str) -> bool:
    return any(argument.variable.name == name for argument in function.arguments)


def _declared_parameter(function: FuncItem, name: str) -> str | None:
    """The axis of ``function``'s parameter ``name`` by its declared type (``group: Group[tp]``)."""
    signature = function.type
    if isinstance(signature, CallableType) and name in signature.arg_names:
        return axis_of_type(signature.arg_types[signature.arg_names.index(name)])
    return None


def _assigned(function: FuncItem, target_is: Callable[[Expression], bool]) -> list[Expression]:
    """The values assigned in ``function``'s body (not nested functions) to a target ``target_is``, except
    where they cannot be the group a collective gets (:func:`_may_run`)."""
    return [statement.rvalue for statement in _may_run(function.body) if isinstance(statement, AssignmentStmt)
            for target in statement.lvalues if target_is(target)]


def _may_run(block: Block) -> Iterator[Statement]:
    """The statements of ``block`` and the blocks in it, less those in a branch mypy will not check
    (a configuration rules it out: :mod:`spmd_mypy.configurations.pruning`) and those under ``if group is
    None:``, the fallback to the default group for a ``None`` the types rule out (a ``Group[tp] | None``
    is read as the group of ``tp``: docs/spec.md#process-groups)."""
    if block.is_unreachable:
        return
    for statement in block.body:
        yield statement
        blocks = nested_blocks(statement)
        if isinstance(statement, IfStmt) and _tests_none(statement.expr[0]):
            blocks = blocks[1:]
        for inner in blocks:
            yield from _may_run(inner)


def _tests_none(test: Expression) -> bool:
    """``NAME is None`` (the body runs only where the value is None)."""
    return (isinstance(test, ComparisonExpr) and test.operators == ["is"] and isinstance(test.operands[1], NameExpr)
            and test.operands[1].fullname == "builtins.None")


def _owner_argument(function: FuncItem, name: str) -> bool:
    """Whether ``name`` is ``function``'s first argument (``self``, or an autograd Function's ``ctx``)."""
    return bool(function.arguments) and function.arguments[0].variable.name == name and class_of(function) is not None


def _is_attribute(target: Expression, method: FuncItem, name: str) -> bool:
    return (isinstance(target, MemberExpr) and target.name == name and isinstance(target.expr, NameExpr)
            and _owner_argument(method, target.expr.name))


def _methods(function: FuncItem) -> list[FuncItem]:
    """The methods of the class ``function`` is defined in (decorated ones, such as ``@staticmethod``, too)."""
    owner = class_of(function)
    nodes = [symbol.node for symbol in owner.names.values()] if owner is not None else []
    return [node.func if isinstance(node, Decorator) else node for node in nodes
            if isinstance(node, (FuncDef, Decorator))]


def group_call_hook(axis: str) -> Callable[[FunctionContext | MethodContext], Type]:
    """A call whose result is the group over ``axis`` (a declared function): typed ``ProcessGroup[axis]``."""
    return lambda ctx: typed_group(ctx.default_return_type, axis)


def group_of_hook(ctx: FunctionContext) -> Type:
    """``spmd.group_of(tp)``: the group over ``tp`` (a flattened one is over no single axis)."""
    axes = axes_of(ctx.args[0][0]) if ctx.args and len(ctx.args[0]) == 1 else None
    return typed_group(ctx.default_return_type, axes[0]) if axes is not None and len(axes) == 1 else ctx.default_return_type


def mesh_group_hook(ctx: MethodContext) -> Type:
    """``mesh.get_group("tp")``: the group over the named dim."""
    axis = _mesh_lookup(ctx.context) if isinstance(ctx.context, CallExpr) else None
    return typed_group(ctx.default_return_type, axis) if axis is not None else ctx.default_return_type


def declaration_for(group: Expression, tree: MypyFile) -> str | None:
    """The ``groups`` key that would declare ``group``: its function's full name, or ``*.attr``.

    None where no declaration can name it (a variable, a method's result).
    """
    group = _unwrapped(group)
    if isinstance(group, MemberExpr):
        return f"*.{group.name}"
    return function_name(group.callee, tree) if isinstance(group, CallExpr) else None


def _unwrapped(group: Expression) -> Expression:
    """``group``, or the call strict mode wrapped as a call of a value (:mod:`spmd_mypy.wrappers`), maybe
    more than once: a declared function from a module mypy does not follow (Megatron's)."""
    while isinstance(group, CallExpr) and marked(group, CALLED_VALUE):
        group = group.args[0]
    return group


def function_name(callee: Expression, tree: MypyFile) -> str | None:
    """The full name of the module-level function ``callee`` refers to, None for anything else.

    Also where mypy does not follow the import (megatron has no py.typed:
    under ``ignore_missing_imports`` its names are mypy's placeholders, named
    after the importing module), by reading the import statement.
    """
    if isinstance(callee, RefExpr) and isinstance(callee.node, (FuncBase, Decorator)):
        return callee.fullname
    if isinstance(callee, NameExpr) and _unfollowed(callee):
        return _imported_name(callee.name, tree)
    if isinstance(callee, MemberExpr):
        module = _module_name(callee.expr, tree)
        return f"{module}.{callee.name}" if module is not None else None
    return None


def _module_name(expr: Expression, tree: MypyFile) -> str | None:
    if isinstance(expr, RefExpr) and isinstance(expr.node, MypyFile):
        return expr.node.fullname
    if isinstance(expr, NameExpr) and _unfollowed(expr):
        return _imported_name(expr.name, tree)
    return None


def _unfollowed(expr: NameExpr) -> bool:
    return isinstance(expr.node, Var) and expr.node.is_suppressed_import


def _imported_name(local: str, tree: MypyFile) -> str | None:
    """What ``local`` names by ``tree``'s imports: ``from m import f as local`` -> ``m.f``."""
    for statement in tree.imports:
        if isinstance(statement, ImportFrom):
            module, _ = correct_relative_import(tree.fullname, statement.relative, statement.id, tree.is_package_init_file())
            for name, alias in statement.names:
                if (alias or name) == local:
                    return f"{module}.{name}"
        elif isinstance(statement, Import):
            for module, alias in statement.ids:
                if (alias or module.partition(".")[0]) == local:
                    return module if alias else local
    return None


def _mesh_lookup(call: CallExpr) -> str | None:
    """``mesh.get_group("tp")``, ``mesh.get_group(mesh_dim="tp")``, ``mesh["tp"].get_group()``."""
    callee = call.callee
    if not (isinstance(callee, MemberExpr) and callee.name == "get_group"):
        return None
    if not call.args:
        receiver = callee.expr
        return _literal(receiver.index) if isinstance(receiver, IndexExpr) else None
    if len(call.args) == 1 and call.arg_names[0] in (None, _MESH_DIM):
        return _literal(call.args[0])
    return None


def _group_of(call: CallExpr) -> str | None:
    """``spmd.group_of(tp)``: its one axis (a flattened group is several, so names none)."""
    if not (isinstance(call.callee, RefExpr) and call.callee.fullname == GROUP_OF and len(call.args) == 1):
        return None
    axes = axes_of(call.args[0])
    return axes[0] if axes is not None and len(axes) == 1 else None


def _literal(expr: Expression) -> str | None:
    return expr.value if isinstance(expr, StrExpr) else None
