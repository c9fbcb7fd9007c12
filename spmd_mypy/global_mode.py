"""Global SPMD per axis: ``@spmd.global_spmd(tp)`` regions, ``@spmd.local_map(ep)`` inside them.

The mode of the code being checked comes from the enclosing defs: mypy's
checker keeps the stack of functions it is in (``api.scope.stack``), and a
walk over the module (once per module, cached) records for every ``def`` the
axes that are global in its body: ``@global_spmd(axes)`` adds axes,
``@local_map(axes)`` removes them, an undecorated nested def inherits.
Module-level code is local on every axis.

In a global region this module

* refines the result of every modelled op (:mod:`spmd_mypy.calls`) on the
  global axes with :func:`spmd_stubs.sharding.propagate`, from the op's
  shape behaviour (:data:`spmd_mypy.ops.SHAPES`) and the dims the call passes;
* types ``spmd.einsum/matmul/linear/sum/amax/amin`` with ``out_partial_axes``
  (in local mode too: the local op, then reinterpret V -> P on each named axis);
* checks the boundary of a global function: the arguments of a call (their
  partition specs on the callee's global axes) and the returned values
  (checked when mypy applies the decorator, after the body);
* types collectives by their shard forms only (:func:`global_collective`).

mypy's own compatibility check reads ``S(i)`` as ``V`` (local SPMD); the
shard dims and orders on global axes are compared here and reported as
``spmd-shard-mismatch``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

from mypy.nodes import (
    ARG_STAR,
    ArgKind,
    AssignmentStmt,
    Block,
    CallExpr,
    ClassDef,
    Context,
    Decorator,
    Expression,
    ForStmt,
    FuncDef,
    FuncItem,
    IfStmt,
    Import,
    ImportAll,
    ImportFrom,
    IndexExpr,
    IntExpr,
    ListExpr,
    MatchStmt,
    MemberExpr,
    MypyFile,
    NameExpr,
    OverloadedFuncDef,
    RefExpr,
    ReturnStmt,
    SliceExpr,
    StarExpr,
    Statement,
    StrExpr,
    TryStmt,
    TupleExpr,
    UnaryExpr,
    WhileStmt,
    WithStmt,
)
from mypy.plugin import CheckerPluginInterface, FunctionContext, FunctionSigContext, MethodContext, MethodSigContext
from mypy.types import CallableType, FunctionLike, Instance, TupleType, Type, get_proper_type

from spmd_stubs.core import sharding
from spmd_stubs.core import AxisType, Code, Kind, PartialOf, Replicate, Scalar, SpmdTypeError, TensorType
from spmd_mypy import errorcodes, polymorphism, report
from spmd_mypy.annotations import AnnotationError, axes_of
from spmd_mypy.config import Config
from spmd_mypy.inference import Actual, Choice, Everywhere, OpCall, infer, type_of
from spmd_mypy.ops import REQUIRED, TABLE, Shape, effect_for, shape_for
from spmd_mypy.representation import (
    TensorTranslator,
    result_type,
    spmd_members,
    spmd_of,
    with_spmd,
)

GLOBAL_SPMD = "spmd_stubs.regions.global_spmd"
LOCAL_MAP = "spmd_stubs.regions.local_map"
REGIONS = (GLOBAL_SPMD, LOCAL_MAP)
OPS_MODULE = "spmd_stubs.ops."
SPMD_OPS = ("einsum", "matmul", "linear", "sum", "amax", "amin")
_PARTIAL_OF = {"amax": "max", "amin": "min"}
NONE: frozenset[str] = frozenset()


# --------------------------------------------------------------------------
# Which axes are global where: one walk per module
# --------------------------------------------------------------------------


@dataclass
class _Region:
    """A def decorated ``@global_spmd`` / ``@local_map``."""

    func: FuncDef
    axes: frozenset[str]
    """The axes global in its body."""


@dataclass
class _Modes:
    tree: MypyFile
    by_def: dict[int, frozenset[str]] = field(default_factory=dict)
    """id(FuncDef) -> the axes global in its body."""
    regions: dict[int, _Region] = field(default_factory=dict)
    """id(decorator CallExpr) -> the def it decorates."""
    returned: dict[int, tuple[FuncDef, int | None]] = field(default_factory=dict)
    """id(expression) -> the def whose return value it is, and its index in a returned tuple."""
    returned_params: dict[int, list[tuple[NameExpr, str, int | None]]] = field(default_factory=dict)
    """id(FuncDef) -> the parameters it returns as they are (``return x``)."""


_MODES: dict[int, _Modes] = {}


def _modes(tree: MypyFile) -> _Modes:
    cached = _MODES.get(id(tree))
    if cached is None or cached.tree is not tree:
        cached = _Modes(tree)
        if _imports_spmd_stubs(tree):
            _walk(tree.defs, NONE, cached, None)
        _MODES[id(tree)] = cached
    return cached


def _imports_spmd_stubs(tree: MypyFile) -> bool:
    """Only a module that imports spmd_stubs can decorate a def (torch's thousand modules are skipped)."""
    for node in tree.imports:
        if isinstance(node, Import):
            names = [name for name, _ in node.ids]
        elif isinstance(node, (ImportFrom, ImportAll)):
            names = [node.id]
        else:
            continue
        if any(name == "spmd_stubs" or name.startswith("spmd_stubs.") for name in names):
            return True
    return False


def _walk(body: Iterable[Statement], axes: frozenset[str], modes: _Modes, owner: FuncDef | None) -> None:
    for statement in body:
        for func, inner, decorated in _defs_in(statement, axes, modes):
            modes.by_def[id(func)] = inner
            if inner:
                _scan_returns(func, func.body.body, modes)
            _walk(func.body.body, inner, modes, func)
        for block in _blocks(statement):
            _walk(block.body, axes, modes, owner)


def _scan_returns(func: FuncDef, body: list[Statement], modes: _Modes) -> None:
    """Record where ``func``'s return values come from (it is global on some axis).

    mypy checks function bodies after the decorators are applied, so a
    returned value is checked by the hook that types it: the returned
    expression itself (an op, a call), or for ``return name`` the last
    assignment to ``name`` before it in the same block; a returned parameter
    is checked against its declared type.
    """
    params = {arg.variable.name for arg in func.arguments}
    for index, statement in enumerate(body):
        if isinstance(statement, ReturnStmt) and statement.expr is not None:
            items = statement.expr.items if isinstance(statement.expr, TupleExpr) else [statement.expr]
            tupled = isinstance(statement.expr, TupleExpr)
            for position, item in enumerate(items):
                slot = position if tupled else None
                modes.returned[id(item)] = (func, slot)
                if isinstance(item, NameExpr):
                    source = _last_assignment(body[:index], item.name)
                    if source is not None:
                        modes.returned[id(source)] = (func, slot)
                    elif item.name in params:
                        modes.returned_params.setdefault(id(func), []).append((item, item.name, slot))
        elif not isinstance(statement, (FuncDef, Decorator, ClassDef, OverloadedFuncDef)):
            for block in _blocks(statement):
                _scan_returns(func, block.body, modes)


def _last_assignment(before: list[Statement], name: str) -> Expression | None:
    for statement in reversed(before):
        if isinstance(statement, AssignmentStmt) and len(statement.lvalues) == 1:
            target = statement.lvalues[0]
            if isinstance(target, NameExpr) and target.name == name:
                return statement.rvalue
    return None


def _defs_in(statement: Statement, axes: frozenset[str], modes: _Modes) -> Iterator[tuple[FuncDef, frozenset[str], bool]]:
    """The defs a statement makes, with the axes global in each and whether a region decorator marks it."""
    if isinstance(statement, OverloadedFuncDef):
        for item in statement.items:
            yield from _defs_in(item, axes, modes)
        if statement.impl is not None:
            yield from _defs_in(statement.impl, axes, modes)
    elif isinstance(statement, Decorator):
        inner, decorated = set(axes), False
        for decorator in reversed(statement.decorators):  # innermost first; the outermost wins
            region = _region_call(decorator)
            if region is None:
                continue
            fullname, region_axes = region
            decorated = True
            if fullname == GLOBAL_SPMD:
                inner |= region_axes
            else:
                inner -= region_axes
        if decorated:
            for decorator in statement.decorators:
                if _region_call(decorator) is not None:
                    modes.regions[id(decorator)] = _Region(statement.func, frozenset(inner))
        yield statement.func, frozenset(inner), decorated
    elif isinstance(statement, FuncDef):
        yield statement, axes, False


def _blocks(statement: Statement) -> list[Block]:
    if isinstance(statement, ClassDef):
        return [statement.defs]
    if isinstance(statement, IfStmt):
        return [*statement.body, *([statement.else_body] if statement.else_body else [])]
    if isinstance(statement, (ForStmt, WhileStmt)):
        return [statement.body, *([statement.else_body] if statement.else_body else [])]
    if isinstance(statement, WithStmt):
        return [statement.body]
    if isinstance(statement, TryStmt):
        extra = [b for b in (statement.else_body, statement.finally_body) if b is not None]
        return [statement.body, *statement.handlers, *extra]
    if isinstance(statement, MatchStmt):
        return list(statement.bodies)
    return []


def _region_call(decorator: Expression) -> tuple[str, frozenset[str]] | None:
    """``global_spmd(tp)`` / ``local_map(dp, ep)`` -> (fullname, axes)."""
    if not (isinstance(decorator, CallExpr) and isinstance(decorator.callee, RefExpr)):
        return None
    fullname = decorator.callee.fullname
    if fullname not in REGIONS:
        return None
    axes: set[str] = set()
    for arg in decorator.args:
        named = _static_axes(arg)
        if named is not None:
            axes.update(named)
    return fullname, frozenset(axes)


def _static_axes(expr: Expression) -> tuple[str, ...] | None:
    """The mesh axes ``expr`` names (``tp``, ``(dp, cp)``), None where it names none statically."""
    try:
        return axes_of(expr)
    except AnnotationError:
        return None


def current_axes(api: CheckerPluginInterface) -> frozenset[str]:
    """The axes global where the checker is now (the innermost enclosing def's)."""
    scope = getattr(api, "scope", None)
    tree = getattr(api, "tree", None)
    if scope is None or tree is None:
        return NONE
    stack = scope.stack
    if len(stack) < 2:
        return NONE
    modes = _modes(tree)
    for item in reversed(stack):
        if isinstance(item, FuncItem) and id(item) in modes.by_def:
            return modes.by_def[id(item)]
    return NONE


def axes_of_def(api: CheckerPluginInterface, func: FuncDef) -> frozenset[str]:
    """The axes global in ``func``'s body (the module holding it is walked once)."""
    tree = getattr(api, "tree", None)
    if tree is not None:
        modes = _modes(tree)
        if id(func) in modes.by_def:
            return modes.by_def[id(func)]
    modules = getattr(api, "modules", {})
    parts = func.fullname.split(".")
    for end in range(len(parts) - 1, 0, -1):
        module = modules.get(".".join(parts[:end]))
        if module is not None:
            if module.fullname.partition(".")[0] == "torch":
                return NONE
            return _modes(module).by_def.get(id(func), NONE)
    return NONE


# --------------------------------------------------------------------------
# Ops: refining the local result on the global axes
# --------------------------------------------------------------------------

Refine = Callable[[Sequence[Choice], "TensorType | None"], "TensorType | None"]


@dataclass
class _Args:
    """A call's arguments by parameter name (what the shape parameters are read from)."""

    by_name: dict[str, list[tuple[Expression, ArgKind]]]
    receiver: Expression | None

    def get(self, name: str) -> list[tuple[Expression, ArgKind]] | None:
        return self.by_name.get(name) or None


def _args(ctx: FunctionContext | MethodContext, receiver: Expression | None) -> _Args:
    by_name: dict[str, list[tuple[Expression, ArgKind]]] = {}
    for name, exprs, kinds in zip(ctx.callee_arg_names, ctx.args, ctx.arg_kinds):
        if name is not None:
            by_name[name] = list(zip(exprs, kinds))
    return _Args(by_name, receiver)


class _NoRule(Exception):
    """The call's dims are not static: the op has no rule here."""


def _int(expr: Expression) -> int:
    if isinstance(expr, IntExpr):
        return expr.value
    if isinstance(expr, UnaryExpr) and expr.op == "-" and isinstance(expr.expr, IntExpr):
        return -expr.expr.value
    raise _NoRule("a dim that is not an int literal")


def _ints(entries: list[tuple[Expression, ArgKind]]) -> tuple[int, ...]:
    if len(entries) == 1 and isinstance(entries[0][0], (TupleExpr, ListExpr)):
        return tuple(_int(item) for item in entries[0][0].items)
    return tuple(_int(expr) for expr, kind in entries if kind != ARG_STAR)


def _value(args: _Args, name: str, default: object) -> object:
    entries = args.get(name)
    if entries is None:
        if default is REQUIRED:
            raise _NoRule(f"{name} is not given")
        return default
    expr = entries[0][0]
    if isinstance(expr, NameExpr) and expr.fullname in ("builtins.True", "builtins.False"):
        return expr.fullname == "builtins.True"
    if isinstance(expr, NameExpr) and expr.fullname == "builtins.None":
        return None
    if len(entries) == 1 and not isinstance(expr, (TupleExpr, ListExpr)):
        return _int(expr)
    return _ints(entries)


def _dims(value: object) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise _NoRule("a bool where dims were expected")
    if value == ():
        raise _NoRule("an empty dim list")
    return (value,) if isinstance(value, int) else tuple(value)  # type: ignore[arg-type]


def behaviour_of(shape: Shape | None, args: _Args) -> sharding.Behaviour:
    """The shape behaviour of this call (its dims read from the arguments)."""
    if shape is None:
        return sharding.Opaque("has no shard propagation rule")
    try:
        return _behaviour(shape, args)
    except _NoRule as why:
        return sharding.Opaque(f"has no shard propagation rule for this call ({why})")


def _behaviour(shape: Shape, args: _Args) -> sharding.Behaviour:
    kind = shape.kind
    if kind == "view":
        if args.get(shape.params[0][0]) is None:
            raise _NoRule("no shape")
        return _view(args, shape.params[0][0])
    values = {name: _value(args, name, default) for name, default in shape.params}
    if kind == "pointwise":
        return sharding.Pointwise()
    if kind in ("matmul", "rmatmul"):
        return sharding.Matmul()
    fixed = {"mm": "ij,jk->ik", "bmm": "bij,bjk->bik", "mv": "ij,j->i", "dot": "i,i->", "outer": "i,j->ij"}
    if kind in fixed:
        return sharding.Matmul((fixed[kind],))
    if kind == "einsum":
        return sharding.Einsum(_equation(args))
    if kind == "linear":
        return sharding.Linear()
    if kind == "attention":
        return sharding.Attention()
    if kind == "reduce_or_pointwise":
        if args.get("other") is not None:
            return sharding.Pointwise()
        kind = "reduce"
    if kind == "reduce":
        return sharding.Reduce(_dims(values.get("dim")), bool(values.get("keepdim", False)), shape.partial)
    if kind == "along":
        dims = _dims(next(iter(values.values())))
        if dims is None:
            raise _NoRule("dim=None")
        return sharding.Along(dims)
    if kind == "along_last_two":
        return sharding.Along((-2, -1))
    if kind == "along_trailing":
        normalized = values["normalized_shape"]
        count = 1 if isinstance(normalized, int) else len(normalized)  # type: ignore[arg-type]
        return sharding.Along(tuple(range(-count, 0)))
    if kind == "transpose":
        first, second = values.values()
        return sharding.Transpose(int(first), int(second))  # type: ignore[call-overload]
    if kind == "matrix_transpose":
        return sharding.Transpose(0, 1, matrix=True)
    if kind == "last_two_transpose":
        return sharding.Transpose(-2, -1)
    if kind == "permute":
        return sharding.Permute(_dims(values["dims"]) or ())
    if kind == "movedim":
        return sharding.Movedim(_dims(values["source"]) or (), _dims(values["destination"]) or ())
    if kind == "unsqueeze":
        return sharding.Unsqueeze(int(values["dim"]))  # type: ignore[call-overload]
    if kind == "squeeze":
        return sharding.Squeeze(_dims(values["dim"]))
    if kind == "flatten":
        return sharding.Flatten(int(values.get("start_dim", 0)), int(values.get("end_dim", -1)))  # type: ignore[call-overload]
    if kind in ("cat", "stack"):
        dim = int(next(iter(values.values())))  # type: ignore[call-overload]
        return sharding.Concat(dim) if kind == "cat" else sharding.Stack(dim)
    raise _NoRule(kind)


def _equation(args: _Args) -> str:
    for entries in args.by_name.values():
        for expr, _ in entries:
            if isinstance(expr, StrExpr):
                return expr.value
            raise _NoRule("the equation is not a string literal")
    raise _NoRule("no equation")


def _view(args: _Args, name: str) -> sharding.View:
    """``x.view(x.shape[0], -1)``: the dims provably kept at the front and the back."""
    entries = args.get(name) or []
    if len(entries) == 1 and isinstance(entries[0][0], (TupleExpr, ListExpr)):
        items: list[tuple[Expression, bool]] = [
            (item.expr if isinstance(item, StarExpr) else item, isinstance(item, StarExpr))
            for item in entries[0][0].items
        ]
    else:
        items = [(expr, kind == ARG_STAR) for expr, kind in entries]
    source = args.receiver if args.receiver is not None else _first_tensor(args)
    pieces = [_piece(expr, star, source) for expr, star in items]
    if len(items) == 1 and pieces[0][0] == "other" and _maybe_int(items[0][0]) is None:
        pieces = [("star", 0)]  # a lone non-literal may be a whole shape: its length is unknown
    ndim: int | None = 0
    for piece in pieces:
        if piece[0] == "star":
            ndim = None
        elif piece[0] in ("front", "back"):
            ndim = None if ndim is None else ndim + piece[1]
        elif ndim is not None:
            ndim += 1
    prefix = 0
    for kind, value in pieces:
        if kind == "dim" and value == prefix:
            prefix += 1
        elif kind == "front" and prefix == 0:
            prefix = value
        else:
            break
    suffix = 0
    for kind, value in reversed(pieces):
        if kind == "dim" and value == -(suffix + 1):
            suffix += 1
        elif kind == "back" and suffix == 0:
            suffix = value
        else:
            break
    return sharding.View(prefix, suffix, ndim)


def _first_tensor(args: _Args) -> Expression | None:
    entries = args.get("input") or args.get("self")
    return entries[0][0] if entries else None


def _piece(expr: Expression, star: bool, source: Expression | None) -> tuple[str, int]:
    """One entry of a new shape: ``("dim", i)`` for ``x.shape[i]``, ``("front", k)`` for ``*x.shape[:k]``..."""
    if star:
        if isinstance(expr, IndexExpr) and _shape_of(expr.base, source) and isinstance(expr.index, SliceExpr):
            s = expr.index
            if s.begin_index is None and s.end_index is not None and s.stride is None:
                end = _maybe_int(s.end_index)
                if end is not None and end >= 0:
                    return ("front", end)
            if s.end_index is None and s.begin_index is not None and s.stride is None:
                begin = _maybe_int(s.begin_index)
                if begin is not None and begin < 0:
                    return ("back", -begin)
        return ("star", 0)
    if isinstance(expr, IndexExpr) and _shape_of(expr.base, source):
        index = _maybe_int(expr.index)
        if index is not None:
            return ("dim", index)
    if (
        isinstance(expr, CallExpr)
        and isinstance(expr.callee, MemberExpr)
        and expr.callee.name == "size"
        and _same(expr.callee.expr, source)
        and len(expr.args) == 1
    ):
        index = _maybe_int(expr.args[0])
        if index is not None:
            return ("dim", index)
    return ("other", 0)


def _maybe_int(expr: Expression) -> int | None:
    try:
        return _int(expr)
    except _NoRule:
        return None


def _shape_of(expr: Expression, source: Expression | None) -> bool:
    return isinstance(expr, MemberExpr) and expr.name == "shape" and _same(expr.expr, source)


def _same(a: Expression | None, b: Expression | None) -> bool:
    if a is None or b is None:
        return False
    if isinstance(a, NameExpr) and isinstance(b, NameExpr):
        return a.name == b.name and (a.node is b.node or a.node is None or b.node is None)
    if isinstance(a, MemberExpr) and isinstance(b, MemberExpr):
        return a.name == b.name and _same(a.expr, b.expr)
    return False


def _on_axis(choice: Choice, axis: str, axes: frozenset[str]) -> AxisType | Scalar | None:
    if isinstance(choice, TensorType):
        return sharding.effective(choice, axis, axes)
    if isinstance(choice, Everywhere):
        return Replicate
    return choice


def refiner(
    api: CheckerPluginInterface,
    context: Context,
    name: str,
    op: str,
    args: _Args,
    partial_axes: tuple[str, ...] = (),
    swap: bool = False,
) -> Refine | None:
    """The global refinement of an op's local result, or None where nothing is global.

    ``partial_axes``: the call's ``out_partial_axes`` (spmd.* ops); on a local
    axis they reinterpret the local V result as P, on a global one they allow
    a sharded contraction.
    """
    axes = current_axes(api)
    if not axes and not partial_axes:
        return None
    shape = shape_for(name)
    behaviour = behaviour_of(shape, args) if axes else sharding.Pointwise()
    partial = (shape.partial if shape is not None else None) or "sum"
    if shape is not None and shape.kind == "rmatmul":
        swap = True

    def refine(combination: Sequence[Choice], local: TensorType | None) -> TensorType | None:
        if local is None:
            return None
        mapping = local.as_dict()
        operands = list(combination[1::-1]) + list(combination[2:]) if swap else list(combination)
        if name == "linear" and len(operands) > 2:
            for axis in partial_axes:
                _check_bias(_on_axis(operands[2], axis, axes), axis)
        for axis in sorted(axes):
            if axis not in mapping:
                continue
            on_axis = [_on_axis(c, axis, axes) for c in operands]
            result = sharding.propagate(
                behaviour, on_axis, axis, op, mapping[axis], partial if axis in partial_axes else None
            )
            if result is None:
                mapping.pop(axis)
            else:
                mapping[axis] = result
        for axis in partial_axes:
            if axis not in axes:
                mapping[axis] = _reinterpret_partial(op, mapping.get(axis), axis, partial)
        refined = TensorType.of(sharding.normalise_orders(mapping))
        if axes:
            check_returned(api, context, [refined])
        return refined

    return refine


def _check_bias(bias: AxisType | Scalar | None, axis: str) -> None:
    """``spmd.linear(x, w, b, out_partial_axes=tp)``: a whole bias would join the pending sum once per rank."""
    if isinstance(bias, AxisType) and bias.kind in (Kind.R, Kind.I):
        raise SpmdTypeError(
            Code.PARTIAL_AFFINE,
            axis,
            f"spmd.linear(x, w, b, out_partial_axes={axis}) adds the bias {bias.on(axis)} on every rank to a "
            f"result pending a sum over {axis}, so the bias would be counted once per rank. Fix: add it after "
            f"the reduction: spmd.all_reduce(spmd.linear(x, w, out_partial_axes={axis}), {axis}, src=P, dst=R) + b.",
        )


def _reinterpret_partial(op: str, local: AxisType | None, axis: str, reduce: str) -> AxisType:
    """Local SPMD's ``out_partial_axes``: the local op's result reinterpreted V -> P[reduce]."""
    target = PartialOf(reduce)
    if local is None or local.kind is Kind.V:
        return target
    if local.kind is Kind.R:
        why = (
            "a replicated result would be counted once per rank by the pending reduction"
            if reduce == "sum"
            else "it is already the same on every rank"
        )
        fix = f"drop {axis} from out_partial_axes, or convert(y, {axis}, src=R, dst={target}) to keep its value"
    elif local.kind is Kind.I:
        why = "an invariant result would be counted once per rank by the pending reduction"
        fix = f"drop {axis} from out_partial_axes"
    else:
        why = f"the result already is {local.on(axis)}"
        fix = f"drop {axis} from out_partial_axes"
    raise SpmdTypeError(
        Code.INVALID_TRANSITION,
        axis,
        f"spmd.{op}(..., out_partial_axes={axis}) reinterprets the local result V -> {target} on axis {axis}, "
        f"but the local result is {local.on(axis)}: {why}. Fix: {fix}.",
    )


# --------------------------------------------------------------------------
# Hooks: torch ops (called from spmd_mypy.calls), spmd.* ops, region decorators
# --------------------------------------------------------------------------


def op_refiner(ctx: FunctionContext | MethodContext, name: str, op: str, method: bool) -> Refine | None:
    """For a torch op's hook: the refinement, None where the code is local on every axis."""
    if not current_axes(ctx.api):
        return None
    receiver = None
    if method and isinstance(ctx.context, CallExpr) and isinstance(ctx.context.callee, MemberExpr):
        receiver = ctx.context.callee.expr
    return refiner(ctx.api, ctx.context, name, op, _args(ctx, receiver))


def attribute_refiner(api: CheckerPluginInterface, context: Context, name: str) -> Refine | None:
    """For ``w.T`` / ``w.mT``."""
    if not current_axes(api):
        return None
    return refiner(api, context, name, name, _Args({}, None))


def spmd_op_hook(name: str, config: Config) -> Callable[[FunctionContext], Type]:
    """``spmd.einsum/matmul/linear/sum/amax/amin(..., out_partial_axes=...)``."""
    rule = TABLE[name]

    def hook(ctx: FunctionContext) -> Type:
        groups = [
            (arg_name, [Actual(e, t) for e, t in zip(exprs, types)])
            for arg_name, exprs, types in zip(ctx.callee_arg_names, ctx.args, ctx.arg_types)
        ]
        partial_axes: tuple[str, ...] = ()
        for arg_name, actuals in groups:
            if arg_name == "out_partial_axes" and actuals and actuals[0].expr is not None:
                named = _static_axes(actuals[0].expr)
                if named is None and not _is_none(actuals[0].expr):
                    report.fail(
                        ctx.api,
                        ctx.context,
                        "out_partial_axes takes a mesh axis or a tuple of them, written statically (e.g. "
                        "out_partial_axes=tp or (dp, tp)); the checker cannot type this call.",
                        errorcodes.BY_RULE[Code.ANNOTATION],
                    )
                    return ctx.default_return_type
                partial_axes = named or ()
        operands = [actuals for arg_name, actuals in groups if arg_name != "out_partial_axes"]
        call = OpCall(name, operands, ctx.context, ctx.api, config, effect_for(name))
        args = _args(ctx, None)
        call.refine = refiner(ctx.api, ctx.context, name, name, args, partial_axes)
        results = infer(rule, call)
        if results is None:
            if not partial_axes:
                return ctx.default_return_type
            results = [None]
            results = [_only_partial(call, partial_axes, _PARTIAL_OF.get(name, "sum"))]
        return result_type(ctx.default_return_type, results)

    return hook


def _only_partial(call: OpCall, partial_axes: tuple[str, ...], reduce: str) -> TensorType:
    """Untyped operands: the result is known only on the out_partial axes."""
    return TensorType.of({axis: PartialOf(reduce) for axis in partial_axes})


def _is_none(expr: Expression) -> bool:
    return isinstance(expr, NameExpr) and expr.fullname == "builtins.None"


def region_hook(ctx: FunctionContext) -> Type:
    """``@global_spmd(tp)`` / ``@local_map(ep)``: a def returning a parameter as it is gets checked here.

    Other returned values are checked by the hooks that type them
    (:func:`check_returned`): mypy checks a body after its decorators.
    """
    modes = _modes(ctx.api.tree)  # type: ignore[attr-defined]
    region = modes.regions.get(id(ctx.context))
    if region is None:
        return ctx.default_return_type
    func = region.func
    signature = func.type
    if isinstance(signature, CallableType):
        declared_params = dict(zip(signature.arg_names, signature.arg_types))
        for expr, name, slot in modes.returned_params.get(id(func), []):
            if name in declared_params:
                _check_return_slot(ctx.api, expr, func, slot, declared_params[name], modes)
    return ctx.default_return_type


def check_returned(api: CheckerPluginInterface, context: Context, typ: Type | Sequence[TensorType | None]) -> None:
    """If ``context`` is (the source of) a global def's return value: its partition specs must be the declared ones."""
    tree = getattr(api, "tree", None)
    if tree is None:
        return
    modes = _modes(tree)
    entry = modes.returned.get(id(context))
    if entry is None:
        return
    func, slot = entry
    _check_return_slot(api, context, func, slot, typ, modes)


def _check_return_slot(
    api: CheckerPluginInterface,
    context: Context,
    func: FuncDef,
    slot: int | None,
    typ: Type | Sequence[TensorType | None],
    modes: _Modes,
) -> None:
    axes = modes.by_def.get(id(func), NONE)
    signature = func.type
    if not axes or not isinstance(signature, CallableType):
        return
    declared = get_proper_type(signature.ret_type)
    if slot is not None:
        if not isinstance(declared, TupleType) or slot >= len(declared.items):
            return
        declared = get_proper_type(declared.items[slot])
    wanted = spmd_of(declared)
    if wanted is None:
        return
    actuals = list(typ) if isinstance(typ, (list, tuple)) else spmd_members(typ)  # type: ignore[arg-type]
    for actual in actuals:
        _compare(api, context, wanted, actual, axes, f"the return value of {func.name}")


def _compare(
    api: CheckerPluginInterface,
    context: Context,
    declared: TensorType,
    actual: TensorType | None,
    axes: frozenset[str],
    where: str,
) -> None:
    if actual is None:
        return
    for axis in sorted(axes):
        want, got = sharding.effective(declared, axis, axes), sharding.effective(actual, axis, axes)
        if want is None or got is None:
            continue
        error = sharding.spec_mismatch(want, got, axis, where)
        if error is not None:
            report.rule_error(api, context, error)


def check_arguments(ctx: FunctionSigContext | MethodSigContext) -> None:
    """A call of a global function: each argument's partition spec on the callee's global axes."""
    signature = ctx.default_signature
    if not isinstance(signature, CallableType) or not any(spmd_of(t) is not None for t in signature.arg_types):
        return
    definition = signature.definition
    if isinstance(definition, Decorator):
        definition = definition.func
    if not isinstance(definition, FuncDef):
        return
    axes = axes_of_def(ctx.api, definition)
    if not axes:
        return
    name = definition.name
    for formal, arg_name, exprs in zip(signature.arg_types, signature.arg_names, ctx.args):
        declared = spmd_of(formal)
        if declared is None:
            continue
        for expr in exprs:
            for actual in spmd_members(type_of(ctx.api, expr)):
                _compare(ctx.api, expr, declared, actual, axes, f"parameter {arg_name} of {name}")


class _ForgetSpecs(TensorTranslator):
    """A global axis passed through a function that does not mention it loses its partition spec."""

    def __init__(self, axes: frozenset[str]) -> None:
        super().__init__()
        self.axes = axes

    def tensor(self, t: Instance) -> Type:
        tensor_type = spmd_of(t)
        if tensor_type is None:
            return t
        mapping = {
            axis: (axis_type.local if axis in self.axes and axis_type.shard is not None else axis_type)
            for axis, axis_type in tensor_type.axes
        }
        return with_spmd(t, TensorType.of(sharding.normalise_orders(mapping)))


def forget_passed_specs(api: CheckerPluginInterface, default: FunctionLike, instantiated: FunctionLike) -> FunctionLike:
    """After axis polymorphism: a global axis the callee's return type never mentions comes back as V.

    The callee's body is local on that axis (it never names it), so nothing
    says its result keeps the argument's partition spec.
    """
    axes = current_axes(api)
    if not axes or instantiated is default or not isinstance(instantiated, CallableType):
        return instantiated
    assert isinstance(default, CallableType)
    mentioned = {axis for t in _tensors_in(default.ret_type) for axis, _ in t.axes}
    passed = axes - mentioned
    if not passed:
        return instantiated
    return instantiated.copy_modified(ret_type=instantiated.ret_type.accept(_ForgetSpecs(frozenset(passed))))


def _tensors_in(typ: Type) -> list[TensorType]:
    found: list[TensorType] = []

    class _Collect(TensorTranslator):
        def tensor(self, t: Instance) -> Type:
            tensor_type = spmd_of(t)
            if tensor_type is not None:
                found.append(tensor_type)
            return t

    typ.accept(_Collect())
    return found


# --------------------------------------------------------------------------
# Collectives in global mode (seed 000: only the Shard forms propagate)
# --------------------------------------------------------------------------


def global_collective(
    op: str, src: AxisType, dst: AxisType, mapping: dict[str, AxisType], axis: str, axes: frozenset[str]
) -> None:
    """Update ``mapping`` for ``op`` on global ``axis``; raises :class:`SpmdTypeError`."""
    sharding.global_collective(op, src, dst, mapping, axis, axes)


def signature_hook(ctx: FunctionSigContext | MethodSigContext) -> FunctionLike:
    """Every user function's signature: the global boundary, then axis polymorphism."""
    check_arguments(ctx)
    signature = forget_passed_specs(ctx.api, ctx.default_signature, polymorphism.instantiate(ctx))
    if isinstance(signature, CallableType):
        check_returned(ctx.api, ctx.context, signature.ret_type)
    return signature


def check_asserted_spec(actual: TensorType, asserted: TensorType, axis: str, axes: frozenset[str]) -> None:
    """``assert_type`` on a global axis: a known partition spec may not be contradicted."""
    want, got = sharding.effective(asserted, axis, axes), sharding.effective(actual, axis, axes)
    if want is None or got is None:
        return
    error = sharding.spec_mismatch(want, got, axis, "assert_type")
    if error is not None:
        raise error
