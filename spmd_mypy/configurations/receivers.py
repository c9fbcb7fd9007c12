"""What a module call's receiver is bound to: the values every binding the module makes of it assigns.

Read from mypy's analysed tree of the module being checked:

* a local (of the function the call is in): every binding of its name in
  that function's body, a parameter being one not followed;
* ``self.attr`` (``self`` a method's first parameter): every
  ``self.attr = ...`` in the methods of the classes whose methods may run on
  the object (its class's bases, and the bases of its subclasses in the
  module: the subclasses themselves, and classes mixed in beside it) and every
  ``attr = ...`` in their bodies; an ``x.attr = ...`` on any other object
  (not a method's ``self``) is a binding not followed, since it may be this
  object's.

A binding other than a plain assignment (an unpacking, a ``for`` or
``with`` target, ``+=``) is not followed.  What other modules assign is not
seen (:mod:`.following` assumes the same).
"""

from __future__ import annotations

from mypy.nodes import (
    LDEF,
    AssignmentStmt,
    CallExpr,
    ClassDef,
    Expression,
    ForStmt,
    FuncDef,
    ListExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    OperatorAssignmentStmt,
    StarExpr,
    Statement,
    TempNode,
    TupleExpr,
    TypeInfo,
    WithStmt,
)
from mypy.plugin import CheckerPluginInterface

from spmd_mypy.statements import class_of, walk


def bound_values(receiver: Expression, api: CheckerPluginInterface) -> list[Expression | None]:
    """What ``receiver`` is given, every way the module binds it (None: a binding not followed)."""
    if isinstance(receiver, CallExpr):
        return [receiver]
    function = api.scope.current_function()  # type: ignore[attr-defined]
    if not isinstance(function, FuncDef):
        return []
    if isinstance(receiver, NameExpr) and receiver.kind == LDEF:
        if any(argument.variable.name == receiver.name for argument in function.arguments):
            return [None]
        return [value for visit in walk(function.body.body) if visit.scope is None
                for target, value in _bindings(visit.statement) if _names(target, receiver.name)]
    if isinstance(receiver, MemberExpr) and _is_self(receiver.expr, function):
        return _attribute_values(receiver.name, function.info, api.tree)  # type: ignore[attr-defined]
    return []


def _attribute_values(name: str, owner: TypeInfo, tree: MypyFile) -> list[Expression | None]:
    """Every value ``.name`` is given in the module: by ``self`` in the methods of the classes related to
    ``owner`` (bases, subclasses), ``name = ...`` in their bodies; None for another object's ``.name``."""
    visits = list(walk(tree.defs))
    classes = [v.statement.info for v in visits if isinstance(v.statement, ClassDef) and v.statement.info is not None]
    values: list[Expression | None] = []
    for visit in visits:
        method = visit.scope.node if visit.scope is not None else None
        for target, value in _bindings(visit.statement):
            if isinstance(target, MemberExpr) and target.name == name:
                if method is None or not _is_self(target.expr, method):
                    values.append(None)  # another object's: it may be this one
                elif _related(class_of(method), owner, classes):
                    values.append(value)
        if isinstance(visit.statement, ClassDef) and _related(visit.statement.info, owner, classes):
            values += [value for statement in visit.statement.defs.body
                       for target, value in _bindings(statement) if _names(target, name)]
    return values


def _related(info: TypeInfo | None, owner: TypeInfo, classes: list[TypeInfo]) -> bool:
    """Whether methods of ``info`` may run on an object ``owner``'s methods run on: ``info`` is a base of
    ``owner``, or both are bases of one class of the module (a subclass, or one that mixes them in)."""
    return info is not None and (owner.has_base(info.fullname) or any(
        c.has_base(owner.fullname) and c.has_base(info.fullname) for c in classes))


def _bindings(statement: Statement) -> list[tuple[Expression, Expression | None]]:
    """The targets ``statement`` itself binds, each with its value (None where it is not a plain assignment)."""
    if isinstance(statement, AssignmentStmt):
        if isinstance(statement.rvalue, TempNode):
            return []  # ``head: Column``: an annotation binds nothing
        return [(target, statement.rvalue if target is lvalue else None)
                for lvalue in statement.lvalues for target in _flattened(lvalue)]
    if isinstance(statement, OperatorAssignmentStmt):
        return [(statement.lvalue, None)]
    if isinstance(statement, ForStmt):
        return [(target, None) for target in _flattened(statement.index)]
    if isinstance(statement, WithStmt):
        return [(target, None) for item in statement.target if item is not None for target in _flattened(item)]
    return []


def _flattened(target: Expression) -> list[Expression]:
    if isinstance(target, (TupleExpr, ListExpr)):
        return [inner for item in target.items for inner in _flattened(item)]
    return _flattened(target.expr) if isinstance(target, StarExpr) else [target]


def _names(target: Expression, name: str) -> bool:
    return isinstance(target, NameExpr) and target.name == name


def _is_self(expr: Expression, method: FuncDef) -> bool:
    """Whether ``expr`` is ``method``'s first parameter (``self``)."""
    return (isinstance(expr, NameExpr) and class_of(method) is not None and not method.is_static
            and bool(method.arguments) and expr.name == method.arguments[0].variable.name)
