"""spmd_types' collectives and casts, read as the typed ones: ``spmd.all_reduce(x, group, src=spmd.P, dst=spmd.I)``.

Each call is one request to the typed table (:mod:`spmd_mypy.transitions`),
so its result type and every check are the typed collective's
(docs/spec.md#spmd_types-collectives):

=================================  =================================================
spmd_types                         typed as
=================================  =================================================
``all_reduce(x, a, src=P, dst=)``  ``all_reduce`` (``src=V``: the implicit reinterpret)
``all_gather(x, a, src=V, dst=)``  ``all_gather``
``reduce_scatter(src=P, dst=V)``   ``reduce_scatter``
``all_to_all(src=V, dst=V)``       ``all_to_all``
``redistribute(src=, dst=)``       ``redistribute`` (the route)
``unshard(src=S(i), dst=)``        ``all_gather``
``shard(src=, dst=S(i))``          ``convert``
``convert`` / ``reinterpret``      themselves, ``expert_mode`` as written
``invariant_to_replicate(x, a)``   ``convert(I, R)``
=================================  =================================================

The axis ``a`` is a string (``"tp"``), a ``StrEnum`` member (its value) or
a process group naming an axis (:func:`spmd_mypy.groups.axis_of_group`).
Rows exchanged with ``input_split_sizes`` take, on every other axis, the
type the counts leave them (:func:`spmd_mypy.typed_collectives.rows_elsewhere`);
the other options (``gather_dim``, dtypes, ``async_op``) change no local type; ``all_reduce(inplace=True)`` is also checked as the
in-place form (its target keeps its type: ``spmd-inplace``).  A call whose axis, ``src`` or ``dst`` is not
written out keeps mypy's type.  Where spmd_types' run time accepts what
the spec refuses (``reinterpret(I,P)``, an ``all_to_all`` between ``V`` and
``S(i)``: docs/spec.md#deviations), the table's verdict is
``spmd-runtime-rule``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from mypy.nodes import CallExpr, Expression
from mypy.plugin import FunctionContext
from mypy.types import Type

from spmd_mypy import errorcodes, report
from spmd_mypy.build_state import state_of
from spmd_mypy.call_arguments import Argument, arguments, flag
from spmd_mypy.config import Config
from spmd_mypy.global_mode import boundaries, regions
from spmd_mypy.representation import result_type, tensor_instance, unknown_tensor
from spmd_mypy.sources import SourceUnreadable
from spmd_mypy.spmd_types_api.reading import Site, axis_name, axis_type, site_of
from spmd_mypy.spmd_types_api.spelling import in_spmd_types_spelling
from spmd_mypy.transitions import Request, apply
from spmd_mypy.typed_collectives import check_in_place_target, passed, rows_elsewhere
from spmd_stubs.core import AxisType, Invariant, Kind, Partial, Replicate, SpmdTypeError, Varying


@dataclass(frozen=True)
class Reading:
    """How one spmd_types function reads as a typed request."""

    op: str
    """The typed table's operation."""
    src: AxisType | None = None
    """``src`` where the call leaves it out (None: it must be written)."""
    dst: AxisType | None = None
    """``dst`` where the call leaves it out (None: it must be written)."""
    takes_types: bool = True
    """Whether the function takes ``src``/``dst`` (``invariant_to_replicate`` takes neither)."""


READINGS: dict[str, Reading] = {
    "all_reduce": Reading("all_reduce", src=Partial),
    "all_gather": Reading("all_gather", src=Varying),
    "reduce_scatter": Reading("reduce_scatter", src=Partial, dst=Varying),
    "all_to_all": Reading("all_to_all", src=Varying, dst=Varying),
    "redistribute": Reading("redistribute"),
    "unshard": Reading("all_gather"),
    "shard": Reading("convert"),
    "convert": Reading("convert"),
    "reinterpret": Reading("reinterpret"),
    "invariant_to_replicate": Reading("convert", Invariant, Replicate, takes_types=False),
}
"""spmd_types' collectives and casts, by name (``spmd_types._collectives`` and ``spmd_types._local``)."""


def collective_hook(name: str, settings: Config) -> Callable[[FunctionContext], Type]:
    """``spmd.<name>(x, axis, src=, dst=, expert_mode=, ...)``: the typed request's result."""
    reading = READINGS[name]

    def hook(ctx: FunctionContext) -> Type:
        args = arguments(ctx)
        request = _request(ctx, reading, args, settings) if "x" in args and "axis" in args else None
        if request is None:
            return ctx.default_return_type
        if name == "all_reduce" and flag(args["inplace"][0] if "inplace" in args else None, False) is not False:
            check_in_place_target(ctx, "all_reduce_", request, args["x"][0])
        axis_written = _source(ctx, args["axis"][0], request.axes[0])
        results = apply(request, lambda error: _report(ctx, name, request, axis_written, error),
                        regions.current_axes(ctx.api))
        sent = args.get("input_split_sizes")
        if name == "all_to_all" and sent is not None and passed(sent):
            results = rows_elsewhere(ctx, request.axes, list(results), sent[0]) or results
        boundaries.check_returned(ctx.api, ctx.context, results)
        tensor = tensor_instance(args["x"][1]) or unknown_tensor(ctx.api)
        return result_type(ctx.api, tensor or ctx.default_return_type, results)

    return hook


def _request(ctx: FunctionContext, reading: Reading, args: dict[str, Argument], settings: Config) -> Request | None:
    site = site_of(ctx, settings)
    if site is None:
        return None
    axis = axis_name(args["axis"][0], site)
    src, dst = reading.src, reading.dst
    if reading.takes_types:
        src, dst = (_side(args[name][0], site, reading.op) if name in args else default
                    for name, default in (("src", src), ("dst", dst)))
    expert = flag(args["expert_mode"][0], False) if "expert_mode" in args else False
    if axis is None or src is None or dst is None or expert is None:
        return None
    return Request(reading.op, args["x"][1], (axis,), src, dst, expert)


def _source(ctx: FunctionContext, expr: Expression, axis: str) -> str:
    """The axis argument as written (its name, quoted, where the source cannot be read)."""
    try:
        return state_of(ctx.api).sources.text_of(ctx.api.tree, expr)  # type: ignore[attr-defined]
    except (SourceUnreadable, AttributeError):
        return f'"{axis}"'


def _side(expr: Expression, site: Site, op: str) -> AxisType | None:
    """``src`` or ``dst`` as written; None where unknown, or a shard of unknown dim given to ``all_to_all``,
    whose two forms (``V`` and ``S(i)``) differ."""
    side = axis_type(expr, site)
    if op == "all_to_all" and side == Varying and isinstance(expr, CallExpr):
        return None
    return side


# --------------------------------------------------------------------------
# Where spmd_types' run time and the spec differ
# --------------------------------------------------------------------------

_SCALES = ("reinterpret(I,P) reads every rank's copy of an invariant value as one part of a sum: the sum is "
           "the value times the axis size")
_CHANGES_RANK = ("all_to_all between V and S(i) stacks on one side and concatenates on the other, so the "
                 "tensor's rank changes")


def runtime_only(op: str, src: AxisType, dst: AxisType) -> str | None:
    """Why the spec refuses ``op(src, dst)``, which spmd_types' run time accepts; None where both agree."""
    if op == "reinterpret" and (src.kind, dst.kind) == (Kind.I, Kind.P):
        return _SCALES
    if op == "all_to_all" and src.kind is Kind.V and dst.kind is Kind.V and (src.shard is None) != (dst.shard is None):
        return _CHANGES_RANK
    return None


def _report(ctx: FunctionContext, name: str, request: Request, axis_written: str, error: SpmdTypeError) -> None:
    """The table's verdict, its calls in spmd_types' spelling (``spmd.shard``'s source check names it, a
    convert); ``spmd-runtime-rule`` where spmd_types accepts what the table refuses."""
    error = in_spmd_types_spelling(error, axis_written)
    told = f"{request.op} is told"
    if name != request.op and error.message.startswith(told):
        named = error.message.replace(told, f"spmd.{name} (a {request.op}) is told", 1)
        error = SpmdTypeError(error.code, error.axis, named, error.fix)
    why = runtime_only(request.op, request.src, request.dst)
    if why is None:
        report.rule_error(ctx.api, ctx.context, error)
        return
    fix = error.message[error.message.index("Fix"):]
    message = (f"spmd_types runs {request.op}(src={request.src}, dst={request.dst}) on axis {error.axis}, but the "
               f"SPMD spec has no such transition: {why}. {fix}")
    report.fail(ctx.api, ctx.context, message, errorcodes.RUNTIME_RULE, error)

