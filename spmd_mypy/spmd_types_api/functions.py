"""``@spmd.register_autograd_function`` with a ``typecheck_forward``: its ``assert_type`` calls are the Function's
signature (docs/spec.md#spmd_types-functions).

torchtitan states a hand-written Function's types in a staticmethod the
runtime runs around ``apply``::

    @staticmethod
    def typecheck_forward(x, w, bias, group, group_name):
        spmd.assert_type(x, {group: spmd.S(0)})
        spmd.assert_type(w, {group: spmd.S(0)})
        if bias is not None:
            spmd.assert_type(bias, {group: spmd.S(0)})
        result = AllGatherLinear.apply(x, w, bias, group, group_name)
        spmd.assert_type(result, {**spmd.get_local_type(x), group: spmd.S(1)})
        return result

Read once the module's signatures are analysed, these are written into
``forward`` (each asserted parameter, the result) and ``backward`` (each
gradient parameter the dual of an output, each annotated return the dual of
an input), exactly the annotations a Function declared with ``Tensor[...]``
has; the bodies and the backward's duality are then checked by the same
rules (:mod:`spmd_mypy.autograd`, :mod:`spmd_mypy.function_bodies`).
``{**spmd.get_local_type(x), ...}`` names only the axes it writes: the
others pass through from the arguments, as every typed signature's do
(:mod:`spmd_mypy.polymorphism`).

A dict key that is a parameter of ``typecheck_forward`` (a process group)
is an axis variable named after it: inside the bodies the group parameter
carries it (``ProcessGroup[group]``), so a collective on ``group`` is a
transition on it; at each ``Fn.apply(...)`` it is the axis the argument
names (:func:`spmd_mypy.groups.axis_of_group`), and where the argument
names none the call is untyped (:func:`apply_signature`).

A ``typecheck_forward`` that is anything else (a type chosen by a run-time
value, ``if spmd_mesh_size("ep") > 1``; a bare ``spmd.V``) is not guessed:
the Function stays as declared, and strict mode names it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, cast

from mypy.nodes import (
    AssignmentStmt,
    Block,
    CallExpr,
    ComparisonExpr,
    Decorator,
    DictExpr,
    Expression,
    ExpressionStmt,
    ForStmt,
    FuncDef,
    IfStmt,
    IndexExpr,
    IntExpr,
    MemberExpr,
    NameExpr,
    RefExpr,
    ReturnStmt,
    Statement,
    StrExpr,
    TypeInfo,
    UnaryExpr,
)
from mypy.plugin import CheckerPluginInterface, ClassDefContext, MethodSigContext
from mypy.types import AnyType, CallableType, FunctionLike, Instance, TupleType, Type, TypeOfAny, get_proper_type

from spmd_mypy import errorcodes, report
from spmd_mypy.config import Config
from spmd_mypy.group_types import axis_of_type, is_group, with_axis
from spmd_mypy.groups import axis_of_group
from spmd_mypy.representation import TensorTranslator, retype, spmd_of, with_spmd
from spmd_stubs.core import AxisType, Invariant, Partial, Replicate, Shard, TensorType, Varying, dual

REGISTER = "spmd_types.runtime.register_autograd_function"
ASSERT_TYPE = "spmd_types.runtime.assert_type"
GET_LOCAL_TYPE = "spmd_types._type_attr.get_local_type"
_TYPES = "spmd_types.types."
_KINDS = {"R": Replicate, "I": Invariant, "V": Varying, "P": Partial,
          "Replicate": Replicate, "Invariant": Invariant, "Varying": Varying, "Partial": Partial}
_METADATA = "spmd_mypy_typecheck_forward"
"""Where a Function typed by its ``typecheck_forward`` keeps (mypy's per-class plugin state) its axis variables
(parameter name -> axis) and the parameters it types."""


class Unreadable(Exception):
    """``typecheck_forward`` says something this module does not read; the message says what."""


@dataclass
class Signature:
    """What ``typecheck_forward`` declares: per parameter, per output (one type for each), its axis variables."""

    inputs: dict[str, TensorType] = field(default_factory=dict)
    output: TensorType | None = None
    variables: dict[str, str] = field(default_factory=dict)
    """A group parameter's name -> the axis variable it carries (its own name)."""


# --------------------------------------------------------------------------
# Reading typecheck_forward
# --------------------------------------------------------------------------


def read(function: FuncDef, current_mesh: tuple[str, ...] = ()) -> Signature:
    """The signature ``typecheck_forward`` states, or :class:`Unreadable`; a bare type (``spmd.R``) is that type on
    each axis of ``current_mesh`` (``[spmd_mypy] current_mesh``)."""
    reader = _Reader({argument.variable.name for argument in function.arguments}, current_mesh)
    reader.block(function.body)
    if reader.signature.output is None:
        raise Unreadable("it asserts no type of the result of apply")
    return reader.signature


@dataclass
class _Reader:
    parameters: set[str]
    current_mesh: tuple[str, ...]
    signature: Signature = field(default_factory=Signature)
    results: set[str] = field(default_factory=set)
    """Names bound to ``apply``'s result (or iterating over it)."""
    held: dict[str, dict[str, AxisType]] = field(default_factory=dict)
    """Names bound to a type dict (``output_type = {...}``), as written so far."""

    def block(self, block: Block) -> None:
        for statement in block.body:
            self.statement(statement)

    def statement(self, statement: Statement) -> None:
        if isinstance(statement, ExpressionStmt) and isinstance(statement.expr, StrExpr):
            return  # the docstring
        if isinstance(statement, ExpressionStmt) and isinstance(statement.expr, CallExpr):
            self.asserted(statement.expr)
        elif isinstance(statement, AssignmentStmt) and len(statement.lvalues) == 1:
            self.assigned(statement.lvalues[0], statement.rvalue)
        elif isinstance(statement, IfStmt) and _tests_not_none(statement) and not statement.else_body:
            self.block(statement.body[0])
        elif isinstance(statement, ForStmt) and isinstance(statement.index, NameExpr) and _names(statement.expr,
                                                                                                 self.results):
            self.results.add(statement.index.name)
            self.block(statement.body)
        elif not isinstance(statement, ReturnStmt):
            raise Unreadable(f"line {statement.line} is not an assert_type of a parameter or of apply's result")

    def asserted(self, call: CallExpr) -> None:
        if not (_callee(call) == ASSERT_TYPE and len(call.args) == 2 and isinstance(call.args[0], NameExpr)):
            raise Unreadable(f"line {call.line} is not spmd.assert_type(NAME, TYPE)")
        name = call.args[0].name
        tensor_type = TensorType.of(self.types(call.args[1]))
        if name in self.results:
            self.signature.output = tensor_type
        elif name in self.parameters:
            self.signature.inputs[name] = tensor_type
        else:
            raise Unreadable(f"line {call.line} asserts the type of {name}, neither a parameter nor apply's result")

    def assigned(self, target: Expression, value: Expression) -> None:
        if isinstance(value, CallExpr) and _callee(value) == ASSERT_TYPE:
            # ``x = spmd.assert_type(x, T)``: the statement as :mod:`.narrowing` rewrites it
            self.asserted(value)
        elif isinstance(target, NameExpr) and isinstance(value, CallExpr) and isinstance(value.callee, MemberExpr) \
                and value.callee.name == "apply":
            self.results.add(target.name)
        elif isinstance(target, NameExpr) and isinstance(value, (DictExpr, CallExpr, RefExpr)):
            self.held[target.name] = self.types(value)
        elif isinstance(target, IndexExpr) and isinstance(target.base, NameExpr) and target.base.name in self.held:
            self.held[target.base.name][self.axis(target.index)] = _axis_type(value)
        else:
            raise Unreadable(f"line {target.line} assigns what is not a type or apply's result")

    def types(self, expr: Expression) -> dict[str, AxisType]:
        """A type dict as written: ``{key: T}``, ``{**get_local_type(p), key: T}``, ``dict(get_local_type(p))``,
        or a name holding one; the axes ``get_local_type`` copies are left to pass through."""
        if isinstance(expr, NameExpr) and expr.name in self.held:
            return dict(self.held[expr.name])
        if _local_type_of_parameter(expr, self.parameters) or (
                isinstance(expr, CallExpr) and _callee(expr) == "builtins.dict" and len(expr.args) == 1
                and _local_type_of_parameter(expr.args[0], self.parameters)):
            return {}
        if isinstance(expr, RefExpr) and expr.fullname.startswith(_TYPES) and self.current_mesh:
            return {axis: _axis_type(expr) for axis in self.current_mesh}
        if not isinstance(expr, DictExpr):
            raise Unreadable(f"line {expr.line} writes a type that is neither a dict nor a bare type with "
                             "[spmd_mypy] current_mesh set")
        written: dict[str, AxisType] = {}
        for key, value in expr.items:
            if key is None and _local_type_of_parameter(value, self.parameters):
                continue
            if key is None:
                raise Unreadable(f"line {expr.line} spreads what is not get_local_type of a parameter")
            written[self.axis(key)] = _axis_type(value)
        return written

    def axis(self, key: Expression) -> str:
        if isinstance(key, StrExpr) and key.value.isidentifier():
            return key.value
        if isinstance(key, NameExpr) and key.name in self.parameters:
            self.signature.variables[key.name] = key.name
            return key.name
        raise Unreadable(f"line {key.line} names an axis by neither a string nor a group parameter")


def _axis_type(expr: Expression) -> AxisType:
    """``spmd.R`` ... ``spmd.S(k)`` (``S`` of an expression: a shard of unknown dim, V)."""
    name = expr.fullname.rpartition(".")[2] if isinstance(expr, RefExpr) and expr.fullname.startswith(_TYPES) else ""
    if name in _KINDS:
        return _KINDS[name]
    if isinstance(expr, CallExpr) and _callee(expr) in (f"{_TYPES}S", f"{_TYPES}Shard") and len(expr.args) == 1:
        dim = expr.args[0]
        if isinstance(dim, IntExpr):
            return Shard(dim.value)
        if isinstance(dim, UnaryExpr) and dim.op == "-" and isinstance(dim.expr, IntExpr):
            return Shard(-dim.expr.value)
        return Varying
    raise Unreadable(f"line {expr.line} writes a per-axis type that is not spmd.R, I, V, P or S(k)")


def _callee(call: CallExpr) -> str | None:
    return call.callee.fullname if isinstance(call.callee, RefExpr) else None


def _local_type_of_parameter(expr: Expression, parameters: set[str]) -> bool:
    return (isinstance(expr, CallExpr) and _callee(expr) == GET_LOCAL_TYPE and len(expr.args) == 1
            and isinstance(expr.args[0], NameExpr) and expr.args[0].name in parameters)


def _tests_not_none(statement: IfStmt) -> bool:
    test = statement.expr[0]
    return (len(statement.expr) == 1 and isinstance(test, ComparisonExpr) and test.operators == ["is not"]
            and isinstance(test.operands[1], NameExpr) and test.operands[1].fullname == "builtins.None")


def _names(expr: Expression | None, names: set[str]) -> bool:
    return isinstance(expr, NameExpr) and expr.name in names


# --------------------------------------------------------------------------
# Writing it into forward and backward
# --------------------------------------------------------------------------


def declared_then(check: Callable[[ClassDefContext], None], settings: Config) -> Callable[[ClassDefContext], None]:
    """A Function's class hook: a registered Function's ``typecheck_forward`` written into its methods, then
    ``check`` (the backward's duality)."""

    def run(ctx: ClassDefContext) -> None:
        _declare(ctx, settings)
        check(ctx)

    return run


def _declare(ctx: ClassDefContext, settings: Config) -> None:
    info = ctx.cls.info
    if not any(isinstance(d, RefExpr) and d.fullname == REGISTER for d in ctx.cls.decorators):
        return
    typecheck, forward, backward = (_method(info, name) for name in ("typecheck_forward", "forward", "backward"))
    if typecheck is None or forward is None:
        return
    try:
        signature = read(typecheck, settings.current_mesh)
        if not isinstance(forward.type, CallableType):
            raise Unreadable("forward has no annotations to write its types into")
    except Unreadable as why:
        if settings.strict:
            report.fail(cast(CheckerPluginInterface, ctx.api), ctx.cls, (
                f"`{info.name}.typecheck_forward` is not read as the Function's signature ({why}): its forward and "
                "backward are unchecked. Fix: state each type in typecheck_forward without run-time choices "
                "(a dict keyed by an axis name or a group parameter) and annotate forward's parameters "
                "(x: torch.Tensor), or annotate forward and backward with Tensor[...]."), errorcodes.UNTYPED_BOUNDARY)
        return
    forward.type = _forward_type(ctx.api, forward.type, signature)
    if isinstance(typecheck.type, CallableType):  # it returns apply's result
        typecheck.type = typecheck.type.copy_modified(ret_type=retype(ctx.api, typecheck.type.ret_type, signature.output))
    if backward is not None and isinstance(backward.type, CallableType):
        backward.type = _backward_type(ctx.api, backward.type, forward.type, signature)
    info.metadata[_METADATA] = {"variables": signature.variables, "typed": [*signature.inputs, *signature.variables]}


def _method(info: TypeInfo, name: str) -> FuncDef | None:
    symbol = info.names.get(name)
    node = symbol.node if symbol is not None else None
    return node.func if isinstance(node, Decorator) else node if isinstance(node, FuncDef) else None


def _forward_type(api: object, forward: CallableType, signature: Signature) -> CallableType:
    arg_types = [_parameter(api, name, typ, signature) for name, typ in zip(forward.arg_names, forward.arg_types)]
    returned = retype(api, forward.ret_type, signature.output)
    return forward.copy_modified(arg_types=arg_types, ret_type=returned)


def _parameter(api: object, name: str | None, typ: Type, signature: Signature) -> Type:
    if name in signature.variables:
        proper = get_proper_type(typ)
        return with_axis(proper, signature.variables[name]) if isinstance(proper, Instance) and is_group(
            proper.type) else typ
    declared = signature.inputs.get(name) if name is not None else None
    return retype(api, typ, declared) if declared is not None else typ


def _backward_type(api: object, backward: CallableType, forward: CallableType, signature: Signature) -> CallableType:
    """Each gradient parameter the dual of the output; each annotated return the dual of forward's input."""
    assert signature.output is not None
    gradient = _dual(signature.output)
    arg_types = [backward.arg_types[0], *(retype(api, typ, gradient) for typ in backward.arg_types[1:])]
    returned = get_proper_type(backward.ret_type)
    inputs = forward.arg_names[1:]
    if isinstance(returned, TupleType) and len(returned.items) == len(inputs):
        items = [retype(api, item, _dual(signature.inputs[name])) if name in signature.inputs else item
                 for name, item in zip(inputs, returned.items)]
        return backward.copy_modified(arg_types=arg_types, ret_type=returned.copy_modified(items=items))
    return backward.copy_modified(arg_types=arg_types)


def _dual(tensor_type: TensorType) -> TensorType:
    return TensorType(tuple((axis, dual(axis_type)) for axis, axis_type in tensor_type.axes))


# --------------------------------------------------------------------------
# Fn.apply(...): the axis variables bound to the groups passed
# --------------------------------------------------------------------------


def apply_signature(settings: Config, then: Callable[[MethodSigContext], FunctionLike]
                    ) -> Callable[[MethodSigContext], FunctionLike]:
    """``Fn.apply(...)``'s signature hook: each axis variable the axis the call's group names (none: the call is
    untyped), every parameter ``typecheck_forward`` does not type ``Any`` (as ``apply`` is, untyped, for a
    Function with no SPMD types: plain mypy's verdict on those arguments stays), then ``then`` (every call's
    signature hook)."""

    def hook(ctx: MethodSigContext) -> FunctionLike:
        signature = ctx.default_signature
        proper = get_proper_type(ctx.type)
        info = proper.type_object() if isinstance(proper, CallableType) and proper.is_type_obj() else None
        declared = info.metadata.get(_METADATA) if info is not None else None
        if declared and isinstance(signature, CallableType):
            bound = {variable: _passed_axis(ctx, signature, name, settings)
                     for name, variable in declared["variables"].items()}
            untyped = AnyType(TypeOfAny.special_form)
            arg_types = [typ if name in declared["typed"] else untyped
                         for name, typ in zip(signature.arg_names, signature.arg_types)]
            signature = signature.copy_modified(arg_types=arg_types)
            bound_signature = signature.accept(_Bound(ctx.api, bound))
            assert isinstance(bound_signature, CallableType)
            ctx = ctx._replace(default_signature=bound_signature)
        return then(ctx)

    return hook


def _passed_axis(ctx: MethodSigContext, signature: CallableType, name: str, settings: Config) -> str | None:
    index = signature.arg_names.index(name) if name in signature.arg_names else None
    if index is None or index >= len(ctx.args) or not ctx.args[index]:
        return None
    group = ctx.args[index][0]
    checker = ctx.api
    scope = checker.scope.current_function()  # type: ignore[attr-defined]
    return axis_of_group(group, settings.groups, checker.tree, checker.get_expression_type(group), scope)  # type: ignore[attr-defined]


class _Bound(TensorTranslator):
    """Axis variables renamed to their bound axes; every tensor and group untyped where one is unbound."""

    def __init__(self, api: object, bound: dict[str, str | None]) -> None:
        super().__init__()
        self.api, self.bound = api, bound
        self.unbound = None in bound.values()

    def tensor(self, t: Instance) -> Type:
        declared = spmd_of(t)
        if declared is None:
            return t
        renamed = [(self.bound.get(axis, axis), axis_type) for axis, axis_type in declared.axes]
        if self.unbound or len({axis for axis, _ in renamed}) < len(renamed):
            return with_spmd(self.api, t, None)
        return with_spmd(self.api, t, TensorType(tuple(renamed)))  # type: ignore[arg-type]

    def visit_instance(self, t: Instance) -> Type:
        variable = axis_of_type(t) if is_group(t.type) else None
        if variable is None or variable not in self.bound:
            return super().visit_instance(t)
        axis = self.bound[variable]
        return with_axis(t, axis) if axis is not None else t.copy_modified(args=[AnyType(TypeOfAny.special_form)])
