"""Typed collectives, casts, Megatron helpers and ``assert_type``.

A typed call's result is its input's type with ``dst`` on each named axis
(a tuple of axes names each of them: one collective on the flattened group)
and every other axis passed through.  Validity is the algebra's:
:func:`~spmd_stubs.core.transition` for the src/dst pair (and
``expert_mode``), :func:`~spmd_stubs.core.check_source` for the input's
actual type against ``src``.  The Megatron helpers are fixed calls of the
same operations (:mod:`spmd_stubs.core.megatron_table`), so they get the same messages.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from mypy.nodes import (
    CallExpr,
    Expression,
    IntExpr,
    ListExpr,
    MemberExpr,
    NameExpr,
    OpExpr,
    RefExpr,
    StrExpr,
    TupleExpr,
    TypeInfo,
    UnaryExpr,
)
from mypy.plugin import FunctionContext, FunctionSigContext
from mypy.types import AnyType, CallableType, FunctionLike, NoneType, Type, get_proper_type

from spmd_mypy import errorcodes, report
from spmd_mypy.annotations import (
    AnnotationError,
    DimText,
    Missing,
    axes_of,
    axis_type_of,
    shard_group,
    tensor_type_of,
)
from spmd_mypy.fullnames import ASSERT_TYPE, TO_LOCAL
from spmd_mypy.global_mode import boundaries, regions
from spmd_mypy.representation import (
    members,
    result_type,
    retype,
    spmd_members,
    tensor_instance,
    unknown_tensor,
    updated_members,
)
from spmd_stubs import core
from spmd_stubs.core import AxisType, Code, Partial, SpmdTypeError, TensorType, sharding

if TYPE_CHECKING:
    from spmd_stubs.core.megatron_table import Helper

DECLARING = {ASSERT_TYPE: "assert_type", TO_LOCAL: "to_local"}
"""Calls whose result has the ``TYPE@axis`` arguments' type."""
@dataclass(frozen=True)
class Fixed:
    """A Megatron helper: one typed operation with its axis and src/dst fixed."""

    op: str
    axis: str
    src: AxisType
    dst: AxisType
    dst_without_output_grad: AxisType | None = None
    """``gather_from_sequence_parallel_region(..., tensor_parallel_output_grad=False)``'s dst."""


def _fixed(helper: Helper) -> Fixed:
    typed, unless = helper.typed, helper.dst_if_false
    return Fixed(
        typed.op,
        typed.axis,
        core.parse_axis_type(typed.src),
        core.parse_axis_type(typed.dst),
        None if unless is None else core.parse_axis_type(unless),
    )


@functools.cache
def megatron() -> dict[str, Fixed]:
    """The porting table (:mod:`spmd_stubs.core.megatron_table`, shared with ``spmd-migrate``) as typed operations.

    Built when mypy first asks for a hook in :data:`MEGATRON_MODULE`, not at
    import: most code bases call no Megatron helper.
    """
    from spmd_stubs.core.megatron_table import HELPERS

    return {name: _fixed(helper) for name, helper in HELPERS.items()}


IN_PLACE = {"all_reduce_": "all_reduce"}
"""In-place forms -> the operation they write over their input: typed the same, on a target
whose type the checker can still follow (:func:`_check_in_place_target`)."""

TYPED_OPS = frozenset({*core.COLLECTIVES, *core.CASTS, "redistribute", *IN_PLACE})


@dataclass(frozen=True)
class Request:
    """One typed operation as a call spells it."""

    op: str
    tensor: Type
    axes: tuple[str, ...]
    src: AxisType
    dst: AxisType
    expert_mode: bool


# --------------------------------------------------------------------------
# Reading the call's arguments
# --------------------------------------------------------------------------


def arguments(ctx: FunctionContext) -> dict[str, tuple[Expression, Type]]:
    return {
        name: (exprs[0], types[0])
        for name, exprs, types in zip(ctx.callee_arg_names, ctx.args, ctx.arg_types)
        if name is not None and exprs
    }


def sums(op: tuple[Expression, Type] | None) -> bool:
    """Whether a torch.distributed collective's ``op=`` argument is the default sum (``ReduceOp.SUM``,
    or ``"sum"`` for the functional collectives), the only reduction whose transitions (and backward)
    the table has for these calls."""
    return op is None or (isinstance(op[0], MemberExpr) and op[0].name == "SUM") or (
        isinstance(op[0], StrExpr) and op[0].value == "sum")


def spmd_type_of(expr: Expression) -> AxisType | None:
    """``P`` / ``spmd.R`` / ``S(-1)`` as a value -> the type; None when not static."""
    if isinstance(expr, RefExpr) and isinstance(expr.node, TypeInfo):
        return axis_type_of(expr.node, expr.node.name, None)
    if isinstance(expr, CallExpr) and isinstance(expr.callee, RefExpr) and isinstance(expr.callee.node, TypeInfo):
        dim: DimText = Missing() if not expr.args else "a non-int argument"
        if len(expr.args) == 1 and int_value(expr.args[0]) is not None:
            dim = int_value(expr.args[0])  # type: ignore[assignment]
        return axis_type_of(expr.callee.node, expr.callee.node.name, dim)
    return None


def int_value(expr: Expression) -> int | None:
    if isinstance(expr, IntExpr):
        return expr.value
    if isinstance(expr, UnaryExpr) and expr.op == "-" and isinstance(expr.expr, IntExpr):
        return -expr.expr.value
    return None


def _flag(expr: Expression | None, default: bool) -> bool | None:
    if expr is None:
        return default
    if isinstance(expr, NameExpr) and expr.fullname in ("builtins.True", "builtins.False"):
        return expr.fullname == "builtins.True"
    return None


# --------------------------------------------------------------------------
# Typing one operation
# --------------------------------------------------------------------------


def apply(
    request: Request, report_error: Callable[[SpmdTypeError], None], global_axes: frozenset[str] = frozenset()
) -> list[TensorType | None]:
    """The result types of ``request`` over its input's union members (shard forms only on ``global_axes``)."""

    def update(mapping: dict[str, AxisType]) -> None:
        for axis in request.axes:
            try:
                core.transition(request.op, request.src, request.dst, axis, request.expert_mode)
                if axis in mapping:
                    core.check_source(request.op, request.src, mapping[axis], axis, request.dst, request.expert_mode)
                if axis in global_axes:
                    sharding.global_collective(request.op, request.src, request.dst, mapping, axis, global_axes)
                    continue
            except SpmdTypeError as error:
                report_error(error)
            mapping[axis] = request.dst

    return updated_members(request.tensor, update)


def _typed(ctx: FunctionContext, request: Request | None) -> Type:
    if request is None:
        return ctx.default_return_type
    results = apply(request, lambda error: report.rule_error(ctx.api, ctx.context, error), regions.current_axes(ctx.api))
    boundaries.check_returned(ctx.api, ctx.context, results)
    return result_type(ctx.api, ctx.default_return_type, results)


def _annotation_error(ctx: FunctionContext, error: AnnotationError) -> Type:
    report.fail(ctx.api, ctx.context, f"Bad SPMD type argument: {error}", errorcodes.BY_RULE[Code.ANNOTATION])
    return ctx.default_return_type


def collective_hook(name: str) -> Callable[[FunctionContext], Type]:
    """``spmd_stubs.<name>(x, axis, src=, dst=, expert_mode=)``."""
    op = IN_PLACE.get(name, name)

    def hook(ctx: FunctionContext) -> Type:
        if op == "redistribute" and "axis" not in ctx.callee_arg_names:
            return redistribute_specs(ctx)
        args = arguments(ctx)
        try:
            request = _request(op, args)
        except AnnotationError as error:
            return _annotation_error(ctx, error)
        if request is not None and name in IN_PLACE:
            _check_in_place_target(ctx, name, request, args["x"][0])
        return _typed(ctx, request)

    return hook


def _check_in_place_target(ctx: FunctionContext, name: str, request: Request, target: Expression) -> None:
    """``all_reduce_(x, ...)``: x keeps its type, as any tensor written in place (``spmd-inplace``).

    Except a tensor's ``.grad``: read, it is the pending gradient whether or
    not a sync wrote it (:func:`spmd_mypy.backward.grad_attribute`), as after
    ``p.grad = all_reduce(p.grad, ...)``; the call's result has the synced
    type.  (Another object's ``grad`` attribute keeps its declared type.)  An
    untyped ``x`` has no type to keep.
    """
    if isinstance(target, MemberExpr) and target.name == "grad" and _a_tensor(ctx, target.expr):
        return
    for member in spmd_members(request.tensor):
        for axis in request.axes:
            written = member.get(axis) if member is not None else None
            if written is None:
                continue
            try:
                core.check_inplace(name, written, request.dst, axis)
            except SpmdTypeError as error:
                report.rule_error(ctx.api, ctx.context, error)


def _a_tensor(ctx: FunctionContext, expr: Expression) -> bool:
    """``expr`` is a tensor (each member of its union, None aside)."""
    found = members(ctx.api.get_expression_type(expr))
    return any(tensor_instance(m) is not None for m in found) and all(
        tensor_instance(m) is not None or isinstance(m, NoneType) for m in found
    )


def _default_source(op: str) -> AxisType | None:
    """``src`` left out: P where the signature defaults it (all_reduce, reduce_scatter)."""
    return Partial if op in core.IMPLICIT_PARTIAL else None


def _request(op: str, args: dict[str, tuple[Expression, Type]]) -> Request | None:
    if "x" not in args or "axis" not in args or "dst" not in args:
        return None
    axes = axes_of(args["axis"][0])
    dst = spmd_type_of(args["dst"][0])
    src = spmd_type_of(args["src"][0]) if "src" in args else _default_source(op)
    expert = _flag(args.get("expert_mode", (None, None))[0], False)
    if axes is None or src is None or dst is None or expert is None:
        return None
    return Request(op, args["x"][1], axes, src, dst, expert)


def megatron_hook(helper: Fixed) -> Callable[[FunctionContext], Type]:
    """A Megatron mapping helper: its fixed typed operation on its input tensor."""

    def hook(ctx: FunctionContext) -> Type:
        args = arguments(ctx)
        if "input_" not in args:
            return ctx.default_return_type
        dst = helper.dst
        if helper.dst_without_output_grad is not None:
            output_grad = _flag(args.get("tensor_parallel_output_grad", (None, None))[0], True)
            if output_grad is None:
                return ctx.default_return_type
            dst = dst if output_grad else helper.dst_without_output_grad
        request = Request(helper.op, args["input_"][1], (helper.axis,), helper.src, dst, False)
        return _typed(ctx, request)

    return hook


def megatron_signature(ctx: FunctionSigContext) -> FunctionLike:
    """The helper's input is judged by :func:`megatron_hook`, not by its annotation."""
    signature = ctx.default_signature
    assert isinstance(signature, CallableType)
    arg_types = [retype(ctx.api, t, None) if name == "input_" else t for name, t in zip(signature.arg_names, signature.arg_types)]
    return signature.copy_modified(arg_types=arg_types)


# --------------------------------------------------------------------------
# assert_type
# --------------------------------------------------------------------------


def declared_types(taker: str, types_at: int) -> Callable[[FunctionContext], TensorType | None]:
    """Reads the ``TYPE@axis`` arguments of ``taker``'s parameter ``types_at`` (None: reported as malformed)."""

    def read(ctx: FunctionContext) -> TensorType | None:
        written = ctx.args[types_at] if len(ctx.args) > types_at else []
        try:
            return tensor_type_of([entry for e in written for entry in annotation_entries(e, taker)])
        except AnnotationError as error:
            _annotation_error(ctx, error)
            return None

    return read


def _declare(ctx: FunctionContext, declared: TensorType, known: Type) -> list[TensorType | None]:
    """``known``'s members with the declared axes set, each contradiction reported."""
    global_axes = regions.current_axes(ctx.api)

    def update(mapping: dict[str, AxisType]) -> None:
        before = TensorType.of(mapping)
        for axis, axis_type in declared.axes:
            try:
                if axis in mapping:
                    core.check_asserted(mapping[axis], axis_type, axis)
                    if axis in global_axes:
                        boundaries.check_asserted_spec(before, declared, axis, global_axes)
            except SpmdTypeError as error:
                report.rule_error(ctx.api, ctx.context, error)
            mapping[axis] = axis_type

    return updated_members(known, update)


def declaring_hook(taker: str) -> Callable[[FunctionContext], Type]:
    """``assert_type(x, V@dp, I@tp)`` and ``dtensor.to_local(dt, V@dp, I@tp)``: the result has the declared type.

    ``assert_type`` refines x's unknown axes and rejects contradicted known
    ones; ``to_local``'s DTensor has no SPMD type, so its result is simply
    the declared one.
    """
    read = declared_types(taker, 1)

    def hook(ctx: FunctionContext) -> Type:
        declared = read(ctx)
        if declared is None:
            return ctx.default_return_type
        result = _a_tensor_for_any(ctx)
        return result_type(ctx.api, result, _declare(ctx, declared, result))

    return hook


def _a_tensor_for_any(ctx: FunctionContext) -> Type:
    """The declared result; for an ``Any`` argument (an untyped call's result, an autograd
    Function's ``.apply``) an unknown tensor, which the declaration then types."""
    if not isinstance(get_proper_type(ctx.default_return_type), AnyType):
        return ctx.default_return_type
    return unknown_tensor(ctx.api) or ctx.default_return_type


def from_local_hook(ctx: FunctionContext) -> Type:
    """``dtensor.from_local(x, mesh, V@dp, I@tp)``: the declared types must not contradict x's."""
    declared = declared_types("from_local", 2)(ctx)
    if declared is not None and ctx.arg_types and ctx.arg_types[0]:
        _declare(ctx, declared, ctx.arg_types[0][0])
    return ctx.default_return_type


def annotation_entries(expr: Expression, taker: str) -> list[tuple[str, AxisType]]:
    """A ``TYPE@axis`` value (``V@dp``, ``S(0)@(dp, tp)``) -> ``(axis, type)`` per axis."""
    usage = f"{taker} takes TYPE@axis arguments such as V@dp, S(0)@tp or S(0)@(dp, tp)"
    if not (isinstance(expr, OpExpr) and expr.op == "@"):
        raise AnnotationError(usage)
    axes = axes_of(expr.right)
    axis_type = spmd_type_of(expr.left)
    if axes is None or axis_type is None:
        raise AnnotationError(usage)
    return shard_group(axis_type, list(axes), f"{axis_type}@({', '.join(axes)})")


# --------------------------------------------------------------------------
# redistribute between partition specs
# --------------------------------------------------------------------------


def redistribute_specs(ctx: FunctionContext) -> Type:
    """``redistribute(x, (S(0)@(dp, tp),), (R@dp, R@tp))``: the result is ``dst``.

    Axes the specs do not name pass through.  Errors (``spmd-collective``):
    an invalid request (:func:`spmd_stubs.planner.validate`), an input whose
    known type differs from ``src`` on an axis ``src`` names, and an input
    axis the specs leave out that shards a dim they move (the layout of that
    dim depends on it).  Specs held in variables are not read: unknown result.
    """
    from spmd_stubs.core import planner  # few code bases call redistribute: the others never import it

    given = [(exprs[0], types[0]) for exprs, types in zip(ctx.args, ctx.arg_types) if exprs]
    if len(given) != 3:
        return ctx.default_return_type
    (_, tensor), (src_expr, _), (dst_expr, _) = given
    try:
        src, dst = _spec(src_expr, "src"), _spec(dst_expr, "dst")
        if src is None or dst is None:
            return ctx.default_return_type
        planner.validate(src, dst)
    except AnnotationError as error:
        return _annotation_error(ctx, error)
    except SpmdTypeError as error:
        report.rule_error(ctx.api, ctx.context, error)
        return ctx.default_return_type

    def update(mapping: dict[str, AxisType]) -> None:
        try:
            _check_redistributed(mapping, src, dst)
        except SpmdTypeError as error:
            report.rule_error(ctx.api, ctx.context, error)
        mapping.update(dst.axes)

    results = updated_members(tensor, update)
    boundaries.check_returned(ctx.api, ctx.context, results)
    return result_type(ctx.api, ctx.default_return_type, results)


def _spec(expr: Expression, role: str) -> TensorType | None:
    """A spec written as a tuple (or list) of ``TYPE@axis``; None when it is not written out."""
    if not isinstance(expr, (TupleExpr, ListExpr)):
        return None
    from spmd_stubs.core import planner  # loaded already by redistribute_specs, the only caller

    entries = [entry for item in expr.items for entry in annotation_entries(item, f"redistribute's {role} spec")]
    return planner.spec_of_entries(entries, role)


def _check_redistributed(have: dict[str, AxisType], src: TensorType, dst: TensorType) -> None:
    """The input's known type agrees with ``src``, and no unnamed axis shards a dim the specs move."""
    given = TensorType.of(have)
    shown = str(given)
    for axis, want in src.axes:
        actual = have.get(axis)
        if actual is None or _agrees(actual, want):
            continue
        raise SpmdTypeError(
            Code.COLLECTIVE,
            axis,
            f"redistribute's src says {_on(src, axis)}, but the input is {_on(given, axis)} on axis {axis} "
            f"(the input is {shown}). Fix: write the input's type in src ({shown} on the axes src names), "
            f"or first bring the input to {_on(src, axis)}.",
        )
    named = {axis for axis, _ in src.axes}
    moved = {t.shard for _, t in (*src.axes, *dst.axes) if t.shard is not None}
    for axis, actual in have.items():
        if axis not in named and actual.shard in moved:
            raise SpmdTypeError(
                Code.COLLECTIVE,
                axis,
                f"the input is {actual.on(axis)} (input {shown}), and dim {actual.shard} is resharded by "
                f"this redistribute, whose specs leave {axis} out; the layout of dim {actual.shard} depends "
                f"on it. Fix: name {axis} in both specs, e.g. S({actual.shard})@({axis}, ...) in the order "
                f"the input has.",
            )


def _on(spec: TensorType, axis: str) -> str:
    """``axis``'s entry as written: ``S(0)@(dp,tp)`` for a shard in an ordered group, else ``R@tp``."""
    t = spec.get(axis)
    assert t is not None
    if t.order is None:
        return t.on(axis)
    return f"{t}@({','.join(a for a in spec.shard_axes(t.shard) if spec.get(a).order is not None)})"  # type: ignore[arg-type, union-attr]


def _agrees(actual: AxisType, want: AxisType) -> bool:
    """V and S(i) agree (a varying input may be declared a shard); shards must agree on dim and order."""
    if actual.local != want.local:
        return False
    if actual.shard is None or want.shard is None:
        return True
    return actual.shard == want.shard and (actual.order is None or want.order is None or actual.order == want.order)
