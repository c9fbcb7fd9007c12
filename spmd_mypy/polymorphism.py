"""Axis polymorphism, and calling an ``nn.Module`` through its ``forward``.

A function annotated on some axes accepts tensors that carry more: the
signature is instantiated per call site.  For a parameter declared
``Tensor[R@tp]`` and an argument ``Tensor[R@tp, V@dp]``, the parameter becomes
``Tensor[R@tp, V@dp]`` (so mypy still rejects a wrong type on ``tp``), and the
extra axis ``dp`` passes through to every typed tensor in the return type
that does not mention ``dp`` itself.

When arguments disagree on an extra axis (``V@dp`` and ``R@dp``), the
function is treated as an unknown op on that axis: the types combine by the
nonlinear rule of :func:`spmd_stubs.core.evaluate` (R with V gives V;
Partial or Invariant mixed with anything else is an error, because nothing
is known about how the body treats them).  Arguments with the same type on
the extra axis, or only one argument carrying it, pass it through unchanged.
"""

from __future__ import annotations

from typing import Callable

from mypy.nodes import Decorator, FuncDef, TypeInfo
from mypy.plugin import CheckerPluginInterface, FunctionContext, FunctionSigContext, MethodContext, MethodSigContext
from mypy.typeops import bind_self
from mypy.types import CallableType, FunctionLike, Instance, Type, get_proper_type

from spmd_mypy import report, torch_modules, untyped_boundaries
from spmd_mypy.configurations import instances
from spmd_mypy.fullnames import MODULE
from spmd_mypy.inference import type_of
from spmd_mypy.representation import TensorTranslator, spmd_members, spmd_of, typed_tensors_in, union_of, with_spmd
from spmd_stubs import core
from spmd_stubs.core import Apply, Arg, AxisType, Linearity, Partial, SpmdTypeError, TensorType, Varying


def instantiate(ctx: FunctionSigContext | MethodSigContext) -> FunctionLike:
    """Signature hook: widen typed parameters by the arguments' extra axes, pass those through.

    The declared signature itself where no argument brings an extra axis
    (most calls): nothing is rebuilt then.
    """
    signature = ctx.default_signature
    if not isinstance(signature, CallableType):
        return signature
    formals = [(formal, spmd_of(formal)) for formal in signature.arg_types]
    if all(declared is None for _, declared in formals):
        return signature
    extras: dict[str, list[AxisType]] = {}
    arg_types = []
    for (formal, declared), exprs in zip(formals, ctx.args):
        actuals = spmd_members(type_of(ctx.api, exprs[0], formal)) if declared is not None and exprs else []
        if declared is None or not any(_extra_axes(declared, actual) or _taken_as_partial(declared, actual)
                                       for actual in actuals):
            arg_types.append(formal)
            continue
        widened = [_widen(declared, actual, extras) for actual in actuals]
        proper = get_proper_type(formal)
        assert isinstance(proper, Instance)
        arg_types.append(union_of(with_spmd(ctx.api, proper, w) for w in dict.fromkeys(widened)))
    if not extras:
        return signature.copy_modified(arg_types=arg_types)
    passed = _pass_through(extras, ctx, signature.name or "the call")
    if not passed:
        return signature.copy_modified(arg_types=arg_types)
    return signature.copy_modified(arg_types=arg_types, ret_type=signature.ret_type.accept(_AddAxes(ctx.api, passed)))


def _extra_axes(declared: TensorType, actual: TensorType | None) -> bool:
    """Whether ``actual`` mentions an axis ``declared`` does not."""
    return actual is not None and any(declared.get(axis) is None for axis, _ in actual.axes)


def _taken_as_partial(declared: TensorType, actual: TensorType | None) -> bool:
    """Whether ``actual`` is Varying (or a shard) on an axis where ``declared`` is P: the parameter takes it
    as the parts of a sum, the implicit ``reinterpret(x, axis, src=V, dst=P)`` (docs/spec.md#v-passed-as-p)."""
    return actual is not None and any(
        declared.get(axis) == Partial and axis_type.local == Varying for axis, axis_type in actual.axes)


def _widen(declared: TensorType, actual: TensorType | None, extras: dict[str, list[AxisType]]) -> TensorType:
    """``declared`` with ``actual``'s extra axes, and its Varying where ``declared`` is P."""
    if actual is None:
        return declared
    mapping = dict(declared.axes)
    for axis, axis_type in actual.axes:
        if axis not in mapping:
            mapping[axis] = axis_type
            extras.setdefault(axis, []).append(axis_type)
        elif mapping[axis] == Partial and axis_type.local == Varying:
            mapping[axis] = axis_type
    return TensorType.of(mapping)


def _pass_through(
    extras: dict[str, list[AxisType]], ctx: FunctionSigContext | MethodSigContext, name: str
) -> dict[str, AxisType]:
    """The type each extra axis takes in the result (see the module docstring)."""
    passed: dict[str, AxisType] = {}
    for axis, values in extras.items():
        if len({v.local for v in values}) == 1:
            passed[axis] = values[0]
            continue
        expr = Apply(Linearity.NONLINEAR, *(Arg(i) for i in range(len(values))))
        try:
            combined = core.evaluate(expr, values, f"{name} (not annotated on {axis})", axis)
        except SpmdTypeError as error:
            report.rule_error(ctx.api, ctx.context, error)
            continue
        if combined is not None:
            passed[axis] = combined
    return passed


class _AddAxes(TensorTranslator):
    """Adds the passed-through axes to every typed tensor that does not mention them."""

    def __init__(self, api: CheckerPluginInterface, passed: dict[str, AxisType]) -> None:
        super().__init__()
        self.api, self.passed = api, passed

    def tensor(self, t: Instance) -> Type:
        declared = spmd_of(t)
        if declared is None:
            return t
        return with_spmd(self.api, t, TensorType.of({**self.passed, **declared.as_dict()}))


def module_call_hook(strict: bool) -> Callable[[MethodContext], Type]:
    """``module(x)``: nn.Module.__call__ returns Any; check the call against ``forward`` instead.

    A torch module in the table (``nn.Linear``, or a subclass that keeps its
    ``forward``) is judged as its functional form instead
    (:mod:`spmd_mypy.torch_modules`).  One whose items are not known
    (``nn.Sequential``, a value typed plain ``nn.Module``) gives an unknown
    result, and any other torch module an unmodelled one: strict mode reports
    a typed tensor passed to either.  Otherwise only where SPMD types are
    involved (``forward`` declares them, or a typed tensor is passed):
    elsewhere mypy's own verdict on the call stands, so the plugin changes
    nothing on untyped modules.  In strict mode a typed
    tensor passed to a module whose ``forward`` has no annotations is reported
    (:func:`spmd_mypy.untyped_boundaries.unannotated_module`).
    """

    def hook(ctx: MethodContext) -> Type:
        unjudged = instances.unjudged_module_call(ctx)  # a flag its construction decides otherwise
        if unjudged is not None:
            return unjudged
        receiver = get_proper_type(ctx.type)
        if not isinstance(receiver, Instance) or not _calls_module_call(receiver):
            return ctx.default_return_type
        form = torch_modules.form_of(receiver)
        typed = torch_modules.typed_call(ctx, receiver, form) if form is not None else None
        if typed is not None:
            return typed
        if torch_modules.has_unknown_items(receiver):
            if strict:
                untyped_boundaries.unknown_items(ctx, receiver)
            return ctx.default_return_type
        if strict and torch_modules.is_unmodelled(receiver):
            torch_modules.report_unmodelled(ctx, receiver)
        forward = _forward_type(receiver)
        if forward is None and strict and receiver.type.get("forward") is not None:
            untyped_boundaries.unannotated_module(ctx, receiver)
        if forward is None or not _involves_spmd(forward, ctx.arg_types):
            return ctx.default_return_type
        args = [e for group in ctx.args for e in group]
        kinds = [k for group in ctx.arg_kinds for k in group]
        names = [n for group in ctx.arg_names for n in group]
        checker = ctx.api.expr_checker  # type: ignore[attr-defined]
        name = f"{receiver.type.fullname}.forward"
        callee = checker.transform_callee_type(name, forward, args, kinds, ctx.context, names, receiver)
        result, _ = checker.check_call(callee, args, kinds, ctx.context, names, callable_name=name, object_type=receiver)
        return result  # type: ignore[no-any-return]

    return hook


def _involves_spmd(forward: FunctionLike, arg_types: list[list[Type]]) -> bool:
    declared = [t for item in forward.items for t in (*item.arg_types, item.ret_type)]
    return any(typed_tensors_in(t) for t in (*declared, *(t for group in arg_types for t in group)))


def _calls_module_call(receiver: Instance) -> bool:
    """An nn.Module whose ``__call__`` is Module's own (which runs ``forward``)."""
    symbol = receiver.type.get("__call__")
    return receiver.type.has_base(MODULE) and symbol is not None and _defined_in(symbol.node) == MODULE


def _defined_in(node: object) -> str | None:
    info = getattr(node, "info", None)
    return info.fullname if info is not None else None


def _forward_type(receiver: Instance) -> FunctionLike | None:
    """``forward`` bound to the receiver, when a subclass defines an annotated one."""
    forward = own_method(receiver.type, "forward", MODULE)
    return bind_self(forward, receiver) if forward is not None else None


def own_method(info: TypeInfo, name: str, base: str) -> FunctionLike | None:
    """The declared signature of method ``name`` where a subclass of ``base`` defines it (not ``base`` nor its own bases)."""
    # The class that defines it, from the MRO: a method's own ``info`` is not
    # set yet while the semantic analyser runs class hooks.
    defining = next((cls for cls in info.mro if name in cls.names), None)
    if defining is None or not defining.has_base(base) or defining.fullname == base:
        return None
    node = defining.names[name].node
    if isinstance(node, Decorator):
        node = node.func
    if not isinstance(node, FuncDef):
        return None
    return node.type if isinstance(node.type, FunctionLike) else None


def module_itself_hook(ctx: FunctionContext) -> Type:
    """``apply_module(m)`` (megatron-core) returns ``m`` itself: typed as ``m``, ``apply_module(m)(x)`` is a
    module call, judged as ``m(x)`` is (its flags per instance included), not by a ``forward`` signature
    read once for every instance.  Only where ``m``'s ``forward`` declares SPMD types: elsewhere mypy's own
    ``Callable`` stands, which checks the call as plain mypy does."""
    given = get_proper_type(ctx.arg_types[0][0]) if ctx.arg_types and ctx.arg_types[0] else None
    if not isinstance(given, Instance) or not given.type.has_base(MODULE):
        return ctx.default_return_type
    forward = _forward_type(given)
    return given if forward is not None and _involves_spmd(forward, []) else ctx.default_return_type
