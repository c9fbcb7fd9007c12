"""The boundary of a global function: its arguments' and its returned values' partition specs.

mypy's own compatibility check reads ``S(i)`` as ``V`` (local SPMD); the
shard dims and orders on global axes are compared here and reported as
``spmd-shard-mismatch``.  Returned values are checked when the hook that
types them runs (mypy checks a body after applying its decorators).
"""

from __future__ import annotations

from typing import Sequence

from mypy.nodes import Context, Decorator, FuncDef
from mypy.plugin import CheckerPluginInterface, FunctionContext, FunctionSigContext, MethodSigContext
from mypy.types import CallableType, FunctionLike, Instance, TupleType, Type, get_proper_type

from spmd_mypy import report
from spmd_mypy.global_mode.regions import NONE, Modes, axes_of_def, current_axes, modes_of
from spmd_mypy.inference import type_of
from spmd_mypy.representation import TensorTranslator, spmd_members, spmd_of, typed_tensors_in, with_spmd
from spmd_stubs.core import TensorType, sharding


def region_hook(ctx: FunctionContext) -> Type:
    """``@global_spmd(tp)`` / ``@local_map(ep)``: a def returning a parameter as it is gets checked here.

    Other returned values are checked by the hooks that type them
    (:func:`check_returned`): mypy checks a body after its decorators.
    """
    modes = modes_of(ctx.api, ctx.api.tree)  # type: ignore[attr-defined]
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
    modes = modes_of(api, tree)
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
    modes: Modes,
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
            for actual in spmd_members(type_of(ctx.api, expr, formal)):
                _compare(ctx.api, expr, declared, actual, axes, f"parameter {arg_name} of {name}")


class _ForgetSpecs(TensorTranslator):
    """A global axis passed through a function that does not mention it loses its partition spec."""

    def __init__(self, api: CheckerPluginInterface, axes: frozenset[str]) -> None:
        super().__init__()
        self.api, self.axes = api, axes

    def tensor(self, t: Instance) -> Type:
        tensor_type = spmd_of(t)
        if tensor_type is None:
            return t
        mapping = {
            axis: (axis_type.local if axis in self.axes and axis_type.shard is not None else axis_type)
            for axis, axis_type in tensor_type.axes
        }
        return with_spmd(self.api, t, TensorType.of(sharding.normalise_orders(mapping)))


def forget_passed_specs(api: CheckerPluginInterface, default: FunctionLike, instantiated: FunctionLike) -> FunctionLike:
    """After axis polymorphism: a global axis the callee's return type never mentions comes back as V.

    The callee's body is local on that axis (it never names it), so nothing
    says its result keeps the argument's partition spec.
    """
    axes = current_axes(api)
    if not axes or instantiated is default or not isinstance(instantiated, CallableType):
        return instantiated
    assert isinstance(default, CallableType)
    mentioned = {axis for t in typed_tensors_in(default.ret_type) for axis, _ in t.axes}
    passed = axes - mentioned
    if not passed:
        return instantiated
    return instantiated.copy_modified(ret_type=instantiated.ret_type.accept(_ForgetSpecs(api, frozenset(passed))))


def check_asserted_spec(actual: TensorType, asserted: TensorType, axis: str, axes: frozenset[str]) -> None:
    """``assert_type`` on a global axis: a known partition spec may not be contradicted."""
    want, got = sharding.effective(asserted, axis, axes), sharding.effective(actual, axis, axes)
    if want is None or got is None:
        return
    error = sharding.spec_mismatch(want, got, axis, "assert_type")
    if error is not None:
        raise error
