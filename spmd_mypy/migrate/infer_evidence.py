"""What one checker run saw that annotation inference reads: calls, returns and attribute assignments.

From a :class:`~spmd_mypy.typed_run.TypedRun` of the files being annotated,
for every function and method (nested ones too, named by their path
``Class.method`` or ``outer.inner``, as overlay files name them):

* which of its parameters, and whether its result, lack an SPMD type (no
  annotation, or a plain ``torch.Tensor``);
* every call of it in the checked files (direct calls, ``self.method(x)``,
  and ``module(x)`` calls of an ``nn.Module``'s ``forward``), with the type
  of each argument passed, by parameter name;
* the type of every value it returns (known only where mypy checked its
  body: mypy skips the bodies of unannotated functions);

and for every class, the type of each value assigned to ``self.NAME`` in its
methods where the class declares no type for ``NAME``
(``nn.Parameter(x)`` counts as ``x``).

A function defined twice under one name (``if``/``else``, ``try``/``except``)
lacks nothing: an annotation is written by name, and the two may differ.

A definition mypy loaded from its cache (a module imported but not among
the files) has no ``arguments`` and no body: a function is read through its
argument names, kinds and signature, which every definition has.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator

from mypy import build  # noqa: F401  (mypy's modules import in this order only)
from mypy.argmap import map_actuals_to_formals
from mypy.nodes import (
    ARG_STAR,
    ARG_STAR2,
    FUNC_NO_INFO,
    ArgKind,
    AssignmentStmt,
    CallExpr,
    ClassDef,
    Decorator,
    Expression,
    FuncDef,
    MemberExpr,
    MypyFile,
    NameExpr,
    OverloadedFuncDef,
    RefExpr,
    Statement,
    TypeInfo,
    Var,
)
from mypy.server.subexpr import get_subexpressions
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    NoneType,
    ProperType,
    TupleType,
    Type,
    TypeOfAny,
    get_proper_type,
)

from spmd_mypy.representation import members, spmd_of, tensor_instance
from spmd_mypy.statements import nested_blocks, statements_in
from spmd_mypy.typed_run import TypedRun
from spmd_mypy.wrappers import own_returns

__all__ = ["Site", "FunctionEvidence", "AttributeEvidence", "Evidence", "function_evidence", "gather"]

PARAMETER_CLASS = "torch.nn.parameter.Parameter"


@dataclass(frozen=True)
class Site:
    """One place a value was seen: the file and line, and its type there (None: not seen, e.g. omitted)."""

    path: str
    line: int
    type: Type | None


@dataclass
class FunctionEvidence:
    """One function: what lacks a type, its calls and its returns."""

    module: str
    path: str
    """``Class.method`` / ``outer.inner``: the name overlay files use."""
    file: str
    line: int
    end_line: int
    untyped_params: list[str]
    """Parameters without an SPMD type: unannotated, or annotated a plain ``torch.Tensor``."""
    optional_params: set[str]
    """Of those, the ones whose default is ``None``."""
    untyped_return: bool
    """No return annotation, or a plain ``torch.Tensor`` one (never ``__init__``)."""
    body_checked: bool
    """Whether mypy checked the body (it skips unannotated functions)."""
    calls: list[dict[str, Site]] = field(default_factory=list)
    """Per call: parameter name -> the argument's type."""
    call_lines: list[tuple[str, int]] = field(default_factory=list)
    returns: list[Site] = field(default_factory=list)


@dataclass
class AttributeEvidence:
    """``self.NAME = value`` in the methods of a class that declares no type for NAME."""

    module: str
    path: str
    """``Class.NAME``."""
    file: str
    class_line: int
    class_end_line: int
    assignments: list[Site] = field(default_factory=list)
    """In source order; a type None where the value's type is unknown (an unchecked body)."""


@dataclass
class Evidence:
    functions: dict[FuncDef, FunctionEvidence] = field(default_factory=dict)
    attributes: dict[str, AttributeEvidence] = field(default_factory=dict)
    """By ``module:Class.NAME``."""
    class_style: dict[str, bool] = field(default_factory=dict)
    """``module:Class`` -> whether it declares tensor attributes at class level (``weight: Tensor[...]``)."""


def _is_plain_tensor(typ: Type | None) -> bool:
    """A ``torch.Tensor`` (or Optional of one) with no SPMD type: a place worth annotating."""
    if typ is None:
        return False
    tensors = [m for m in members(typ) if tensor_instance(m) is not None]
    others = [m for m in members(typ) if tensor_instance(m) is None and not _is_none(m)]
    return len(tensors) == 1 and not others and spmd_of(tensors[0]) is None


def _is_none(typ: ProperType) -> bool:
    return isinstance(typ, NoneType)


def _is_unannotated(typ: Type | None) -> bool:
    proper = get_proper_type(typ) if typ is not None else None
    return proper is None or isinstance(proper, AnyType) and proper.type_of_any == TypeOfAny.unannotated


def function_evidence(func: FuncDef, module: str, path: str, file: str) -> FunctionEvidence:
    """What ``func`` lacks, read from its argument names, kinds and signature, which a definition mypy
    loaded from its cache also has (not from its ``arguments``, which only a parsed one has)."""
    signature = func.type if isinstance(func.type, CallableType) else None
    untyped, optional = [], set()
    bound = func.info is not FUNC_NO_INFO and not func.is_static
    defaults = _none_defaults(func)
    for index in range(1 if bound else 0, len(func.arg_names)):
        name = func.arg_names[index]
        if name is None or func.arg_kinds[index] in (ARG_STAR, ARG_STAR2):
            continue
        declared = signature.arg_types[index] if signature is not None else None
        if _is_unannotated(declared) or _is_plain_tensor(declared):
            untyped.append(name)
            if name in defaults:
                optional.add(name)
    returned = signature.ret_type if signature is not None else None
    untyped_return = func.name != "__init__" and not func.is_generator and (
        _is_unannotated(returned) or _is_plain_tensor(returned)
    )
    return FunctionEvidence(module, path, file, func.line, func.end_line or func.line, untyped, optional,
                            untyped_return, body_checked=signature is not None and not _is_unannotated_def(func))


def _none_defaults(func: FuncDef) -> set[str]:
    """The parameters whose default is ``None``; none known for a definition loaded from mypy's cache
    (it keeps no default values: reading its ``arguments`` raises AttributeError)."""
    arguments = getattr(func, "arguments", None) or []
    return {a.variable.name for a in arguments
            if isinstance(a.initializer, NameExpr) and a.initializer.fullname == "builtins.None"}


def _is_unannotated_def(func: FuncDef) -> bool:
    """mypy checks no body of a function with no annotation at all (without check_untyped_defs)."""
    return func.unanalyzed_type is None


@dataclass(frozen=True)
class _Scope:
    """A function or class with its path, and the class a function is a method of."""

    node: FuncDef | ClassDef
    path: str
    cls: ClassDef | None


def _scopes(statements: list[Statement], prefix: str, cls: ClassDef | None) -> Iterator[_Scope]:
    """Every function and class defined in ``statements``, nested ones too, with their paths."""
    for statement in statements:
        if isinstance(statement, OverloadedFuncDef):  # a property with its setter, @overload variants
            yield from _scopes([*statement.items, *([statement.impl] if statement.impl else [])], prefix, cls)
            continue
        if isinstance(statement, Decorator):
            statement = statement.func
        if isinstance(statement, FuncDef):
            path = prefix + statement.name
            yield _Scope(statement, path, cls)
            yield from _scopes(list(statements_in(statement.body)), path + ".", None)
        elif isinstance(statement, ClassDef):
            path = prefix + statement.name
            yield _Scope(statement, path, None)
            yield from _scopes(statement.defs.body, path + ".", statement)
        else:
            for block in nested_blocks(statement):
                yield from _scopes(block.body, prefix, cls)


def _is_tensor_annotation(statement: AssignmentStmt) -> bool:
    return statement.type is not None and any(tensor_instance(m) is not None for m in members(statement.type))


def _read_returns(run: TypedRun, function: FuncDef, found: FunctionEvidence) -> None:
    for returned in own_returns(function):
        typ = run.type_of(returned.expr) if returned.expr is not None else NoneType()
        found.returns.append(Site(found.file, returned.line, typ))


def _read_call(run: TypedRun, call: CallExpr, file: str, evidence: Evidence) -> None:
    target = _called(run, call)
    if target is None:
        return
    func, formal_kinds, formal_names = target
    found = evidence.functions.get(func)
    if found is None:
        return
    formals = map_actuals_to_formals(
        call.arg_kinds, call.arg_names, formal_kinds, formal_names, lambda i: run.type_of(call.args[i]) or _ANY
    )
    passed = {}
    for index, actuals in enumerate(formals):
        name = formal_names[index]
        if name is not None and len(actuals) == 1 and call.arg_kinds[actuals[0]] not in (ARG_STAR, ARG_STAR2):
            passed[name] = Site(file, call.line, run.type_of(call.args[actuals[0]]))
    found.calls.append(passed)
    found.call_lines.append((file, call.line))


def _read_assignments(run: TypedRun, module: str, scope: _Scope, evidence: Evidence) -> None:
    """``self.NAME = value`` in one method, for every NAME its class declares no type for."""
    method, cls = scope.node, scope.cls
    assert isinstance(method, FuncDef) and cls is not None
    if not method.arg_names or method.arg_names[0] is None or method.is_static:
        return
    self_name = method.arg_names[0]
    class_path = scope.path.rsplit(".", 1)[0]
    for statement in statements_in(method.body):
        if not isinstance(statement, AssignmentStmt) or statement.type is not None or len(statement.lvalues) != 1:
            continue
        target = statement.lvalues[0]
        if not (isinstance(target, MemberExpr) and isinstance(target.expr, NameExpr)
                and target.expr.name == self_name) or _declares(cls.info, target.name):
            continue
        key = f"{module}:{class_path}.{target.name}"
        found = evidence.attributes.setdefault(key, AttributeEvidence(
            module, f"{class_path}.{target.name}", evidence.functions[method].file, cls.line, cls.end_line or cls.line))
        found.assignments.append(Site(found.file, statement.line, _assigned_type(run, statement.rvalue)))


_ANY = AnyType(TypeOfAny.special_form)


def _declares(info: TypeInfo | None, name: str) -> bool:
    """Whether the class (or a base of it) declares a type for ``name``: an annotated attribute, or
    anything but an attribute (a property, whose setter ``self.NAME = value`` calls, a method)."""
    if info is None:
        return False
    for base in info.mro:
        symbol = base.names.get(name)
        if symbol is None or symbol.node is None:
            continue
        if not isinstance(symbol.node, Var) or not symbol.node.is_inferred:
            return True
    return False


def _assigned_type(run: TypedRun, value: Expression) -> Type | None:
    """The value's type; ``nn.Parameter(x)`` is ``x``'s."""
    if isinstance(value, CallExpr) and value.args:
        callee = get_proper_type(run.type_of(value.callee)) if run.type_of(value.callee) is not None else None
        ret = get_proper_type(callee.ret_type) if isinstance(callee, CallableType) else None
        if isinstance(ret, Instance) and ret.type.fullname == PARAMETER_CLASS:
            return run.type_of(value.args[0])
    return run.type_of(value)


def _called(run: TypedRun, call: CallExpr) -> tuple[FuncDef, list[ArgKind], list[str | None]] | None:
    """The function a call runs, with the formals its arguments map to (bound methods: without self)."""
    callee = run.type_of(call.callee)
    proper = get_proper_type(callee) if callee is not None else None
    if isinstance(proper, CallableType) and proper.is_type_obj():
        return None  # a class: its __init__'s parameters are not tensors worth inferring here
    if isinstance(proper, CallableType) and isinstance(proper.definition, FuncDef):
        return proper.definition, list(proper.arg_kinds), list(proper.arg_names)
    if isinstance(call.callee, RefExpr) and isinstance(call.callee.node, Decorator):
        func = call.callee.node.func  # a decorated function (global_spmd): its own parameters
        bound = isinstance(call.callee, MemberExpr) and func.info is not FUNC_NO_INFO and not func.is_static
        return _formals(func, bound)
    if isinstance(proper, Instance):
        forward = proper.type.get_method("forward")
        if isinstance(forward, Decorator):
            forward = forward.func
        if isinstance(forward, FuncDef) and forward.arg_names:
            return _formals(forward, bound=True)
    return None


def _formals(func: FuncDef, bound: bool) -> tuple[FuncDef, list[ArgKind], list[str | None]]:
    """The formals of ``func`` (without ``self`` where ``bound``), read from what a definition loaded from
    mypy's cache also has: its argument kinds and names (not its ``arguments``, which only a parsed one has)."""
    skip = 1 if bound else 0
    return func, list(func.arg_kinds[skip:]), list(func.arg_names[skip:])


def gather(run: TypedRun) -> Evidence:
    """Read the evidence of every checked file of ``run``."""
    evidence = Evidence()
    files: list[tuple[str, MypyFile]] = sorted(run.trees.items())
    scopes = {module: list(_scopes(tree.defs, "", None)) for module, tree in files}
    for module, tree in files:
        paths = Counter(scope.path for scope in scopes[module] if isinstance(scope.node, FuncDef))
        for scope in scopes[module]:
            if isinstance(scope.node, FuncDef):
                found = function_evidence(scope.node, module, scope.path, tree.path)
                if paths[scope.path] > 1:  # defined twice (if/else, try/except): which one a name means is
                    found.untyped_params, found.untyped_return = [], False  # the run's, not the source's
                evidence.functions[scope.node] = found
            else:
                evidence.class_style[f"{module}:{scope.path}"] = any(
                    _is_tensor_annotation(s) for s in scope.node.defs.body if isinstance(s, AssignmentStmt))
    for module, tree in files:
        for expression in get_subexpressions(tree):
            if isinstance(expression, CallExpr):
                _read_call(run, expression, tree.path, evidence)
        for scope in scopes[module]:
            if isinstance(scope.node, FuncDef):
                _read_returns(run, scope.node, evidence.functions[scope.node])
                if scope.cls is not None:
                    _read_assignments(run, module, scope, evidence)
    return evidence


def tuple_items(typ: Type) -> list[Type] | None:
    """The items of a fixed tuple type, else None."""
    proper = get_proper_type(typ)
    return list(proper.items) if isinstance(proper, TupleType) else None
