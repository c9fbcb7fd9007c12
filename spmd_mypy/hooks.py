"""What the plugin hooks, as tables: one per kind of mypy hook, full names to the feature that types them.

Each table is a :class:`HookTable`: exact full names first, then rules by
prefix in order; a rule's maker gets the name after its prefix and the
settings, and gives the hook or None (the next rule is asked).  Every hook
made runs behind :func:`guarded`.  :class:`spmd_mypy.main.SpmdPlugin` asks
the tables and keeps each answer for its build.
"""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mypy.semanal import SemanticAnalyzer
from mypy.types import AnyType, TypeOfAny

from spmd_mypy import (
    async_flow,
    autograd,
    backward,
    calls,
    declaring_calls,
    differentiable_collectives,
    dtensor_local_map,
    errorcodes,
    function_bodies,
    groups,
    megatron_helpers,
    mesh_transitions,
    parameter_declarations,
    point_to_point,
    polymorphism,
    raw_collectives,
    runtime_classes,
    scalars,
    signatures,
    typed_collectives,
    untyped_boundaries,
    wrappers,
)
from spmd_mypy.annotations import analyze_spmd_tensor, shard_outside_tensor
from spmd_mypy.config import Config
from spmd_mypy.configurations import instances, unset_flags
from spmd_mypy.configurations import members as enum_members
from spmd_mypy.fullnames import (
    APPLY_MODULE,
    ASSERT_TYPE,
    ASSIGNED,
    ATTRIBUTE_PREFIX,
    AUTOGRAD_BACKWARD,
    AUTOGRAD_GRAD,
    BOUNDARY_GRADIENT,
    CALLED_VALUE,
    COLLECTIVES_MODULE,
    DIFFERENTIABLE_COLLECTIVES_MODULE,
    DTENSOR_LOCAL_MAP,
    FLAGS_CLASS,
    FROM_LOCAL,
    FUNCTION_MODULES,
    GLOBAL_SPMD,
    GROUP_OF,
    LOCAL_MAP,
    MEGATRON_MODULE,
    MESH_GET_GROUP,
    METHOD_PREFIX,
    NOT_USER_CODE,
    PARALLELIZE_MODULE,
    PROCESS_GROUP,
    RAW_COLLECTIVE_MODULES,
    REINTERPRET_MESH,
    RETURN_TYPES,
    RETURNED,
    RING_SHIFT,
    SHARD,
    SPMD_GROUP,
    SPMD_OPS_MODULE,
    SPMD_TENSOR,
    SPMD_TYPES_API_BOUNDARY,
    SPMD_TYPES_ASSERT_LOCAL_TYPE_LIKE,
    SPMD_TYPES_ASSERT_TYPE,
    SPMD_TYPES_ASSERT_TYPE_LIKE,
    SPMD_TYPES_COLLECTIVE_MODULES,
    SPMD_TYPES_FORGOTTEN,
    SPMD_TYPES_LOCAL_MAP,
    SPMD_TYPES_MUTATE_TYPE,
    SPMD_TYPES_NO_TYPECHECK,
    SPMD_TYPES_PACKAGE,
    SPMD_TYPES_REINTERPRET_MESH,
    STARTED,
    TENSOR,
    TENSOR_CLASSES,
    TO_LOCAL,
    TORCH_TRANSFERS,
)
from spmd_mypy.global_mode import boundaries, refine
from spmd_mypy.group_types import add_axis_parameter, analyze_group
from spmd_mypy.layouts import SHARDING_CONFIG, sharding_config_hook
from spmd_mypy.plans import plan_hook
from spmd_mypy.representation import add_hidden_parameter
from spmd_mypy.spmd_types_api import api_boundary as spmd_types_api_boundary
from spmd_mypy.spmd_types_api import asserting as spmd_types_asserting
from spmd_mypy.spmd_types_api import collectives as spmd_types_collectives
from spmd_mypy.spmd_types_api import functions as spmd_types_functions
from spmd_mypy.spmd_types_api import local_map as spmd_types_local_map
from spmd_mypy.spmd_types_api import mutating as spmd_types_mutating
from spmd_mypy.spmd_types_api import unchecked as spmd_types_unchecked
from spmd_stubs.core.torch_ops import TENSOR_ATTRIBUTES

Context = TypeVar("Context")
Hook = Callable[[Any], Any]
Make = Callable[[str, Config], "Hook | None"]
"""(the name, after a rule's prefix; the settings) -> the hook, or None: not this rule's."""


@dataclass(frozen=True)
class HookTable:
    """The hooks of one kind: by exact full name, then by the first rule whose prefix matches and gives one."""

    exact: Mapping[str, Make] = field(default_factory=dict)
    rules: Sequence[tuple[str, Make]] = ()

    def lookup(self, fullname: str, settings: Config) -> Hook | None:
        make = self.exact.get(fullname)
        hook = make(fullname, settings) if make is not None else None
        for prefix, make in self.rules if hook is None else ():
            if fullname.startswith(prefix):
                hook = make(fullname[len(prefix) :], settings)
                if hook is not None:
                    break
        return guarded(hook) if hook is not None else None


def members(names: Collection[str] | Callable[[], Collection[str]], make: Make) -> Make:
    """A rule for a module's own members named in ``names`` (a callable: built when first asked)."""

    def rule(name: str, settings: Config) -> Hook | None:
        known = names() if callable(names) else names
        return make(name, settings) if name in known else None

    return rule


def always(hook: Hook) -> Make:
    """A maker that gives ``hook`` whatever the name and settings."""
    return lambda _name, _settings: hook


# --------------------------------------------------------------------------
# The tables
# --------------------------------------------------------------------------


def _boundary(fullname: str, settings: Config) -> Hook | None:
    """Strict mode: a call of a function or method outside torch, checked for parameters that forget types."""
    if not settings.strict or fullname.startswith(NOT_USER_CODE):
        return None
    return untyped_boundaries.call_hook(fullname)


def _polymorphic_signature(fullname: str, settings: Config) -> Hook | None:
    """A user function's or class's: judged where its flag literals agree with the configuration."""
    if fullname.startswith(NOT_USER_CODE):
        return None
    hook = signatures.signature_hook if not settings.meshes else \
        mesh_transitions.checking_meshes(signatures.signature_hook, settings.meshes)
    return instances.judged_where_agreeing(hook, settings.configurations)


def _raw_collectives(module: str) -> tuple[str, Make]:
    return module, members(raw_collectives.UNTYPED, lambda name, settings: async_flow.checking_async(
        raw_collectives.untyped_collective_hook(module + name, settings.groups, settings.strict)))


def _declared_names(fullname: str, settings: Config) -> Hook | None:
    """A user's function declared in ``groups`` (its result is the group of an axis) or in ``collectives``
    (it is a torch.distributed collective, typed as torch's)."""
    axis = settings.groups.of_function(fullname)
    if axis is not None:
        return groups.group_call_hook(axis)
    collective = dict(settings.collectives).get(fullname)
    if collective is None:
        return None
    return async_flow.checking_async(raw_collectives.untyped_collective_hook(
        raw_collectives.torch_name(collective), settings.groups, settings.strict))


FUNCTIONS = HookTable(
    exact={
        ASSERT_TYPE: always(declaring_calls.declaring_hook("assert_type")),
        TO_LOCAL: always(declaring_calls.declaring_hook("to_local")),
        FROM_LOCAL: always(declaring_calls.from_local_hook),
        GLOBAL_SPMD: always(boundaries.region_hook),
        LOCAL_MAP: always(boundaries.region_hook),
        AUTOGRAD_BACKWARD: always(backward.autograd_hook("tensors", "grad_tensors", "torch.autograd.backward()")),
        AUTOGRAD_GRAD: always(backward.autograd_hook("outputs", "grad_outputs", "torch.autograd.grad()")),
        RETURNED: lambda _, settings: function_bodies.returned_hook(settings),
        STARTED: always(async_flow.started_hook),
        **{name: always(async_flow.transfer_hook) for name in TORCH_TRANSFERS},
        CALLED_VALUE: always(untyped_boundaries.called_value_hook),
        ASSIGNED: always(untyped_boundaries.assigned_hook),
        GROUP_OF: always(groups.group_of_hook),
        APPLY_MODULE: always(polymorphism.module_itself_hook),
        PARALLELIZE_MODULE: always(plan_hook),
        SHARDING_CONFIG: always(sharding_config_hook),
        SPMD_TYPES_API_BOUNDARY: always(spmd_types_api_boundary.any_function),
        **{name: lambda _, settings: spmd_types_asserting.assert_type_hook(settings) for name in SPMD_TYPES_ASSERT_TYPE},
        SPMD_TYPES_ASSERT_TYPE_LIKE: lambda _, settings: spmd_types_asserting.assert_type_like_hook(settings, True),
        SPMD_TYPES_ASSERT_LOCAL_TYPE_LIKE: lambda _, settings: spmd_types_asserting.assert_type_like_hook(settings, False),
        SPMD_TYPES_MUTATE_TYPE: lambda _, settings: spmd_types_mutating.mutate_type_hook(settings),
        SPMD_TYPES_REINTERPRET_MESH: lambda _, settings: mesh_transitions.spmd_types_reinterpret_mesh_hook(settings),
        REINTERPRET_MESH: always(mesh_transitions.reinterpret_mesh_hook),
        RING_SHIFT: always(point_to_point.ring_shift_hook),
        SPMD_TYPES_NO_TYPECHECK: always(spmd_types_unchecked.no_typecheck_hook),
        SPMD_TYPES_FORGOTTEN: always(spmd_types_unchecked.forgotten_hook),
        SPMD_TYPES_LOCAL_MAP: lambda _, settings: spmd_types_local_map.local_map_hook(settings),
        DTENSOR_LOCAL_MAP: lambda _, settings: dtensor_local_map.local_map_hook(settings),
    },
    rules=(
        (COLLECTIVES_MODULE, members(typed_collectives.TYPED_OPS,
                                     lambda name, _: typed_collectives.collective_hook(name))),
        (MEGATRON_MODULE, members(megatron_helpers.helpers,
                                  lambda name, _: megatron_helpers.helper_hook(megatron_helpers.helpers()[name]))),
        (SPMD_OPS_MODULE, members(refine.SPMD_OPS, refine.spmd_op_hook)),
        (DIFFERENTIABLE_COLLECTIVES_MODULE, members(differentiable_collectives.DIFFERENTIABLE, lambda name, settings:
                                                    differentiable_collectives.differentiable_hook(name, settings.groups))),
        *map(_raw_collectives, RAW_COLLECTIVE_MODULES),
        *((module, members(spmd_types_collectives.READINGS, spmd_types_collectives.collective_hook))
          for module in SPMD_TYPES_COLLECTIVE_MODULES),
        *((module, lambda name, settings: calls.function_hook(name, settings) if "." not in name else None)
          for module in FUNCTION_MODULES),
        ("", _declared_names),
        ("", _boundary),
    ),
)

FUNCTION_SIGNATURES = HookTable(
    exact={name: always(spmd_types_asserting.like_signature)
           for name in (SPMD_TYPES_ASSERT_TYPE_LIKE, SPMD_TYPES_ASSERT_LOCAL_TYPE_LIKE)},
    rules=(
        (SPMD_TYPES_PACKAGE, always(spmd_types_api_boundary.own_parameters)),
        (MEGATRON_MODULE, members(megatron_helpers.helpers, always(megatron_helpers.helper_signature))),
        ("", _polymorphic_signature),
    ),
)


def _tensor_method(name: str, settings: Config) -> Hook:
    return backward.backward_method if name == "backward" else calls.method_hook(name, settings)


def _operator_on_union(fullname: str, settings: Config) -> Hook | None:
    """``__rmul__`` where mypy asks for ``"__rmul__ of TensorBase"``: a reflected operator on a union of tensors.

    mypy names a method after its receiver's class, and a union has none, so it
    asks for the callee's own name instead.  It calls a reflected operator on a
    union when the right operand is one (``x * y`` after a branch join of y),
    and tries that before ``x.__mul__(y)``; unhooked, it succeeds with torch's
    unknown ``Tensor`` and no rule is judged.
    """
    method, _, owner = fullname.partition(" of ")
    return calls.method_hook(method, settings) if owner in TENSOR_CLASSES and calls.is_reflected(method) else None


def _module_call(fullname: str, settings: Config) -> Hook | None:
    """``module(x)``: a ``torch.nn.Module``'s ``forward`` through ``__call__``."""
    if fullname.endswith(".__call__") and not fullname.startswith(("builtins.", "typing.")):
        return polymorphism.module_call_hook(settings.strict)
    return None


METHODS = HookTable(exact={MESH_GET_GROUP: always(groups.mesh_group_hook),
                           BOUNDARY_GRADIENT: always(point_to_point.boundary_gradient_hook)}, rules=(
    (METHOD_PREFIX, _tensor_method),
    ("", _operator_on_union),
    ("", _module_call),
    ("", _boundary),
))


def _number_operator(fullname: str, settings: Config) -> Hook | None:
    operator = scalars.operator_of(fullname)
    return scalars.signature_hook(operator, settings) if operator is not None else None


def _typed_apply(fullname: str, settings: Config) -> Hook | None:
    """``Fn.apply(...)``: a Function typed by its ``typecheck_forward`` has its axis variables bound first."""
    polymorphic = _polymorphic_signature(fullname, settings)
    if polymorphic is None or not fullname.endswith(".apply"):
        return None
    return spmd_types_functions.apply_signature(settings, polymorphic)


METHOD_SIGNATURES = HookTable(rules=(("", _number_operator), ("", _typed_apply), ("", _polymorphic_signature)))


def _tensor_attribute(name: str, settings: Config) -> Hook | None:
    if name == "grad":
        return backward.grad_attribute
    record = TENSOR_ATTRIBUTES.get(name)
    return calls.attribute_hook(record, name, settings) if record is not None else None


ATTRIBUTES = HookTable(rules=(
    (f"{FLAGS_CLASS}.", lambda flag, settings: unset_flags.flag_hook(flag, settings.configurations)),
    (RETURN_TYPES, always(calls.named_field)),
    (ATTRIBUTE_PREFIX, _tensor_attribute),
    ("", lambda fullname, settings: runtime_classes.attribute_hook(fullname.rpartition(".")[2], settings.modules)),
))

CLASS_ATTRIBUTES = HookTable(rules=(
    ("", lambda fullname, _: autograd.apply_attribute if fullname.endswith(".apply") else None),
    ("", lambda fullname, settings: enum_members.member_hook(fullname, settings.configurations)),
))


def _spmd_tensor(_name: str, settings: Config) -> Hook:
    """A module that writes an SPMD type has its returns wrapped where they may be judged (a function that
    tests an axis's size) and, in strict mode, its boundaries."""
    return after_analysis(analyze_spmd_tensor, settings)


TYPE_ANALYSES = HookTable(exact={SPMD_TENSOR: _spmd_tensor, SPMD_GROUP: always(analyze_group),
                                 SHARD: always(shard_outside_tensor)})

CLASS_MROS = HookTable(exact={TENSOR: always(add_hidden_parameter("_SpmdType")), PROCESS_GROUP: always(add_axis_parameter)})


def autograd_function_class(settings: Config) -> Hook:
    """A ``torch.autograd.Function`` subclass: its backward checked once its signatures are analysed (first,
    a registered Function's ``typecheck_forward`` written into them)."""
    check = spmd_types_functions.declared_then(autograd.check_backward, settings)
    return guarded(after_analysis(autograd.after_signatures(guarded(check)), settings))


# --------------------------------------------------------------------------
# What every hook shares
# --------------------------------------------------------------------------

_STANDARD = frozenset({"_typeshed", "typing_extensions", "mypy_extensions", *sys.stdlib_module_names})


def installed(module: str, path: str) -> bool:
    """Whether ``module`` is the standard library's or an installed package's (mypy keeps those silent).

    Asked for every module of every run (torch's 1,200 included), so the
    path is split as a string, not parsed into a ``Path``.
    """
    if module.partition(".")[0] in _STANDARD and path.endswith(".pyi"):
        return True  # typeshed's stub; a user's own module may share a standard name (grp.py, code.py)
    parts = path.replace("\\", "/").split("/")
    return "site-packages" in parts or "dist-packages" in parts


def after_analysis(hook: Hook, settings: Config) -> Hook:
    """``hook``, then the current module's wrappers scheduled (:mod:`spmd_mypy.wrappers`): its returns
    (and, strict, untyped third-party calls), wrapped for their hooks; not in the standard library's or
    installed packages' modules, where mypy reports nothing."""
    strict = settings.strict

    def run(ctx: Any) -> Any:
        result = hook(ctx)
        analyzer = getattr(ctx.api, "api", ctx.api)  # a type analyser's semantic analyser, or the analyser itself
        if isinstance(analyzer, SemanticAnalyzer) and not installed(analyzer.cur_mod_id,
                                                                     analyzer.cur_mod_node.path):
            wrappers.schedule(analyzer, wrappers.Wrapping(
                returns=lambda function: function_bodies.wraps_returns(function, settings.sizes)
                or (strict and untyped_boundaries.forgets_return(function)),
                called_values=strict,
                assigned_to=untyped_boundaries.has_plain_tensor if strict else None,
            ))
        return result

    return run


_INFERRED = ("default_return_type", "default_attr_type", "default_signature")
"""Where a hook's context holds what mypy inferred without the plugin."""


def inferred_field(ctx: Any) -> str | None:
    """The context's field holding what mypy inferred without the plugin (None: a context without one)."""
    return next((attribute for attribute in _INFERRED if hasattr(ctx, attribute)), None)


def _fallback(ctx: Any) -> Any:
    """What mypy would have inferred without the plugin."""
    field = inferred_field(ctx)
    return getattr(ctx, field) if field is not None else AnyType(TypeOfAny.from_error)


def guarded(hook: Callable[[Context], Any]) -> Callable[[Context], Any]:
    """Run ``hook``; on an unexpected exception report ``spmd-internal`` and fall back."""

    @functools.wraps(hook)
    def run(ctx: Context) -> Any:
        try:
            return hook(ctx)
        except Exception as error:  # noqa: BLE001 -- a plugin must never crash mypy
            where = traceback.extract_tb(error.__traceback__)[-1]
            message = (
                f"SPMD checker internal error ({type(error).__name__}: {error} at "
                f"{where.filename.rpartition('/')[2]}:{where.lineno}); this expression is treated as "
                "unknown. Please report it."
            )
            api, context = getattr(ctx, "api", None), getattr(ctx, "context", None) or getattr(ctx, "cls", None)
            if api is not None and context is not None:
                api.fail(message, context, code=errorcodes.INTERNAL)
            return _fallback(ctx)

    return run


MODULE_CLASS: Hook = guarded(parameter_declarations.allow_declared_parameters)
"""A ``torch.nn.Module`` subclass: its parameter declarations may type what torch's bases leave untyped."""
