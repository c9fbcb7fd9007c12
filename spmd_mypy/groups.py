"""Which mesh axis a process-group expression (a collective's ``group=``) stands for.

A group names an axis, for certain, where

* the user declared it in ``[spmd_mypy] groups``
  (:class:`~spmd_mypy.config.GroupDeclarations`): a call of a declared
  function (``get_tensor_model_parallel_group()``, whatever its arguments)
  or a declared attribute (``*.tp_group`` covers ``self.tp_group``);
* a DeviceMesh looks it up by a literal name: ``mesh.get_group("tp")``,
  ``mesh.get_group(mesh_dim="tp")``, ``mesh["tp"].get_group()``;
* it is ``spmd.group_of(tp)``.

Anything else names no axis: a variable (``group``), a flattened
``group_of((dp, cp))``, a mesh dim given by number.  The rules read the
expression and its module's imports only, so any check that sees a
``group=`` can ask them.
"""

from __future__ import annotations

from mypy.nodes import (
    CallExpr,
    Decorator,
    Expression,
    FuncBase,
    Import,
    ImportFrom,
    IndexExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    RefExpr,
    StrExpr,
    Var,
)
from mypy.util import correct_relative_import

from spmd_mypy.annotations import axes_of
from spmd_mypy.config import GroupDeclarations

__all__ = ["axis_of_group", "declaration_for"]

GROUP_OF = "spmd_stubs.mesh.group_of"
_MESH_DIM = "mesh_dim"


def axis_of_group(group: Expression, declared: GroupDeclarations, tree: MypyFile) -> str | None:
    """The mesh axis ``group`` (an expression of the module ``tree``) stands for; None where no rule names one."""
    if isinstance(group, MemberExpr):
        return declared.of_attribute(group.name)
    if not isinstance(group, CallExpr):
        return None
    function = function_name(group.callee, tree)
    declared_axis = declared.of_function(function) if function is not None else None
    return declared_axis or _mesh_lookup(group) or _group_of(group)


def declaration_for(group: Expression, tree: MypyFile) -> str | None:
    """The ``groups`` key that would declare ``group``: its function's full name, or ``*.attr``.

    None where no declaration can name it (a variable, a method's result).
    """
    if isinstance(group, MemberExpr):
        return f"*.{group.name}"
    return function_name(group.callee, tree) if isinstance(group, CallExpr) else None


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
