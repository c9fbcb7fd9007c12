"""spmd_types' ``assert_type(x, *types, partition_spec=)``, ``assert_local_type`` and ``assert_type_like``, read as our
``assert_type``.

The types are read by :func:`~spmd_mypy.spmd_types_api.reading.tensor_type`
(a dict, a bare type over ``current_mesh``, a ``PartitionSpec``,
``get_local_type``); the result is x's type with the declared axes set,
and a declaration contradicting a known axis is ``spmd-assert``, as for
``spmd_stubs.assert_type`` (:func:`spmd_mypy.declaring_calls.declared_result`),
its fix in spmd_types' spelling.  Written as a statement, the call narrows
``x`` in place (:mod:`spmd_mypy.spmd_types_api.narrowing`).

``assert_type_like(x, y, overrides)`` asserts y's known type (with its
shards, which spmd_types copies as y's partition spec) with ``overrides``
set on it (:func:`~spmd_mypy.spmd_types_api.reading.like_type`);
``assert_local_type_like`` y's local type.  They return None, so the hook
narrows a name ``x`` in place itself (mypy's binder), wherever the call is.

One difference (docs/spec.md#spmd_types-vocabulary): spmd_types' run time
accepts ``P`` asserted of a ``V`` value and relabels it in place.  The spec
asks for the ``reinterpret(V,P)`` that says where the sum begins, so that
is ``spmd-runtime-rule`` with that call as the fix; the result is ``P``, as
at run time.
"""

from __future__ import annotations

from typing import Callable

from mypy.checker import TypeChecker
from mypy.nodes import ARG_NAMED, ARG_POS, GDEF, LDEF, CallExpr, DictExpr, Expression, NameExpr
from mypy.plugin import FunctionContext, FunctionSigContext
from mypy.types import AnyType, CallableType, FunctionLike, Type, TypeOfAny, get_proper_type

from spmd_mypy import errorcodes, report
from spmd_mypy.build_state import state_of
from spmd_mypy.call_arguments import arguments
from spmd_mypy.config import Config
from spmd_mypy.declaring_calls import declared_result
from spmd_mypy.representation import (
    members,
    result_type,
    spmd_members,
    spmd_of,
    tensor_instance,
    unknown_tensor,
    updated_members,
)
from spmd_mypy.sources import SourceUnreadable
from spmd_mypy.spmd_types_api.reading import Site, axis_name, like_type, site_of, tensor_type
from spmd_mypy.spmd_types_api.spelling import in_spmd_types_spelling
from spmd_stubs.core import AxisType, Kind, Partial, SpmdTypeError, TensorType

_PARTITION_SPEC = "partition_spec"
_OVERRIDES = "overrides"


def assert_type_hook(settings: Config) -> Callable[[FunctionContext], Type]:
    """``spmd.assert_type(x, {"tp": spmd.I}, ...)``: x's type with the declared axes set."""

    def hook(ctx: FunctionContext) -> Type:
        call = ctx.context
        site = site_of(ctx, settings)
        given = tensor_argument(ctx)
        if given is None or site is None or not isinstance(call, CallExpr) or call.arg_kinds[0] != ARG_POS:
            return ctx.arg_types[0][0] if ctx.arg_types and ctx.arg_types[0] else ctx.default_return_type
        written = [arg for arg, kind, name in zip(call.args[1:], call.arg_kinds[1:], call.arg_names[1:])
                   if kind == ARG_POS or (kind == ARG_NAMED and name == _PARTITION_SPEC)]
        declared = tensor_type(written, site)
        if declared is None or len(written) < len(call.args) - 1:  # *types, **options: their types unknown
            return given
        return _asserted(ctx, "assert_type", given, call.args[0], declared, dict(_keys_written(ctx, written, site)))

    return hook


def assert_type_like_hook(settings: Config, with_shards: bool) -> Callable[[FunctionContext], Type]:
    """``spmd.assert_type_like(x, source, overrides)`` (``with_shards``) and ``assert_local_type_like``: the
    assertion of source's known type (its local type alone, without ``with_shards``) with ``overrides`` set
    on it.  The call returns None; x, where it is a name of the scope, is narrowed in place."""
    called = "assert_type_like" if with_shards else "assert_local_type_like"

    def hook(ctx: FunctionContext) -> Type:
        site = site_of(ctx, settings)
        args = arguments(ctx)
        given = tensor_argument(ctx)
        if given is None or site is None or "source" not in args or not _positional_or_named(ctx.context):
            return ctx.default_return_type
        overrides = args.get(_OVERRIDES, (None, None))[0]
        declared = like_type(args["source"][0], overrides, site, with_shards)
        if declared is None:
            return ctx.default_return_type
        tensor = args["tensor"][0]
        written = [overrides] if overrides is not None else []
        narrowed = _asserted(ctx, called, given, tensor, declared, dict(_keys_written(ctx, written, site)))
        if isinstance(tensor, NameExpr) and isinstance(ctx.api, TypeChecker) and _narrowable(tensor, site):
            ctx.api.binder.put(tensor, narrowed)
        return ctx.default_return_type

    return hook


def like_signature(ctx: FunctionSigContext) -> FunctionLike:
    """``assert_type_like``'s signature with ``overrides`` taking any value: spmd_types annotates it as a dict
    of type dicts (``dict[MeshAxis, LocalSpmdType]``) where it takes one type dict, which the hook reads as
    written."""
    signature = ctx.default_signature
    if not isinstance(signature, CallableType) or _OVERRIDES not in signature.arg_names:
        return signature
    arg_types = [AnyType(TypeOfAny.special_form) if name == _OVERRIDES else typ
                 for name, typ in zip(signature.arg_names, signature.arg_types)]
    return signature.copy_modified(arg_types=arg_types)


def _positional_or_named(call: object) -> bool:
    return isinstance(call, CallExpr) and all(kind in (ARG_POS, ARG_NAMED) for kind in call.arg_kinds)


def _narrowable(name: NameExpr, site: Site) -> bool:
    """A local name (a parameter, a variable) of the function, or a module's own name at module level."""
    return name.kind == LDEF if site.function is not None else name.kind == GDEF


def _asserted(ctx: FunctionContext, called: str, given: Type, tensor: Expression, declared: TensorType,
              axes_written: dict[str, str]) -> Type:
    """x's type ``given`` with ``declared`` asserted by ``spmd.<called>``: its axes set, each contradiction
    reported in spmd_types' spelling (the axes as the assertion writes them)."""

    def spelled(error: SpmdTypeError) -> SpmdTypeError:
        return in_spmd_types_spelling(error, axes_written.get(error.axis, f'"{error.axis}"'))

    if partly_unknown(given):  # mypy's join with an unknown tensor: nothing to contradict
        return declared_result(ctx._replace(default_return_type=unknown_tensor(ctx.api) or given), declared)
    relabelled = _relabel_varying_as_partial(ctx, called, given, tensor, declared, axes_written)
    return declared_result(ctx._replace(default_return_type=relabelled), declared, spelled)


def tensor_argument(ctx: FunctionContext) -> Type | None:
    """The first argument's type where it is a tensor (members ``Any`` or tensors): what spmd_types returns,
    though it declares any tensor or sequence of tensors; None for anything else (a sequence)."""
    given = ctx.arg_types[0][0] if ctx.arg_types and ctx.arg_types[0] else None
    if given is None:
        return None
    typed = all(isinstance(get_proper_type(m), AnyType) or tensor_instance(m) is not None for m in members(given))
    return given if typed else None


def partly_unknown(typ: Type) -> bool:
    """Whether a member of ``typ`` (a union where mypy joined a rebinding with an unknown tensor, as in a loop
    that assigns a plain tensor first) has no known SPMD type: what it is, and what it contradicts, is not
    known."""
    return any(spmd_of(member) is None for member in members(typ))


def _relabel_varying_as_partial(ctx: FunctionContext, called: str, known: Type, tensor: Expression,
                                declared: TensorType, axes_written: dict[str, str]) -> Type:
    """x's type ``known``, each axis where it is V and the assertion says P reported and made P (what the run
    time does)."""
    relabelled: set[str] = set()

    def relabel(mapping: dict[str, AxisType]) -> None:
        for axis, asserted in declared.axes:
            actual = mapping.get(axis)
            if actual is not None and actual.kind is Kind.V and asserted.kind is Kind.P:
                mapping[axis] = asserted
                relabelled.add(axis)

    members = updated_members(known, relabel)
    for axis in sorted(relabelled):
        shown = source_text(ctx, tensor) or "x"
        written = axes_written.get(axis, f'"{axis}"')
        varying = next(t for t in spmd_members(known) if t is not None and (t.get(axis) or Partial).kind is Kind.V)
        asserted = declared.get(axis) or Partial
        report.fail(
            ctx.api, ctx.context,
            f"spmd.{called} says {asserted.on(axis)} of a value that is {varying.get(axis)}@{axis} on axis {axis}: "
            f"spmd_types relabels it in place, the SPMD spec has no implicit reinterpret(V,P): only an explicit one "
            f"says that each rank's values are its part of the sum. Fix: {shown} = spmd.reinterpret({shown}, "
            f"{written}, src=spmd.V, dst=spmd.{asserted}) before the assertion.",
            errorcodes.RUNTIME_RULE,
        )
    return result_type(ctx.api, known, members) if relabelled else known


def _keys_written(ctx: FunctionContext, written: list[Expression], site: Site) -> list[tuple[str, str]]:
    """Each dict key of the assertion as written, by the axis it names (for fixes in the user's spelling)."""
    found: list[tuple[str, str]] = []
    for expr in written:
        if isinstance(expr, DictExpr):
            for key, _ in expr.items:
                axis = axis_name(key, site) if key is not None else None
                text = source_text(ctx, key) if key is not None else None
                if axis is not None and text is not None:
                    found.append((axis, text))
    return found


def source_text(ctx: FunctionContext, expr: Expression) -> str | None:
    """``expr`` as the source writes it; None where the source cannot be read."""
    try:
        return state_of(ctx.api).sources.text_of(ctx.api.tree, expr)  # type: ignore[attr-defined]
    except (SourceUnreadable, AttributeError):
        return None
