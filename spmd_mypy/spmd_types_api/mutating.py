"""spmd_types' ``mutate_type(x, axis, src=, dst=)``: a relabel, read as the spec's ``reinterpret`` where it is one.

``mutate_type`` changes the type attribute of ``x`` on the named axes
(one ``axis``; every axis of ``x`` where ``axis`` is left out; the keys of
``src`` or ``dst`` written as dicts) and nothing else: the local tensor is
kept and autograd sees no operation.  The spec's ``reinterpret(src, dst)``
keeps the local tensor too; where its backward is a reinterpret as well and
the value keeps its meaning, the two are the same operation, accepted:
``V -> P`` (each rank's values are its part of the sum) and ``R -> V``
(the copies declared varying; ``expert_mode`` in the spec, not asked of
``mutate_type``, spmd_types' expert relabel).  Every other pair is
``spmd-runtime-rule`` (docs/spec.md#spmd_types-vocabulary), the result
still ``dst`` as at run time, and the fix names the spec's operation in
spmd_types' spelling:

* ``I -> R``, ``I -> V``, ``R -> I``: the spec's ``reinterpret`` moves the
  gradient (an all-reduce; a copy on rank 0) where the relabel does not;
  the fix is ``spmd.reinterpret(...)``;
* ``R -> P``: each rank's copy becomes one part of the sum, which is the
  value times the axis size; the fix is ``spmd.convert(...)``, which keeps
  the value (the expert ``spmd.reinterpret`` where the scaling is meant);
* a pair with no reinterpret (out of ``P``, ``V`` to ``R``/``I``, ``I`` to
  ``P``): the fix is the operation that keeps the value
  (:func:`spmd_stubs.core.comms.instead`).

A value that carries no gradient (a mask, positions built by ``arange``, a
buffer from ``new_zeros``: :func:`spmd_mypy.gradients.built_without_gradient`)
has no backward for the relabel to get wrong, so relabelling its copies as
``R``, ``I`` or ``V`` is accepted (the vision encoders' ``R -> I`` on
position tables); one built as zeros (``new_zeros``, ``torch.zeros``,
``zeros_like``) is every type's zero, so any relabel of it is accepted
(torchtitan's loss accumulator, ``R -> P``).  A relabel on an axis where
x's type is not known is a declaration, as ``assert_type`` is: no rule is
reported there.

``src`` must be x's type on the axis, where that is known (spmd_types
raises there): otherwise ``spmd-assert``.  A call whose axes, ``src`` or
``dst`` cannot be read gives an unknown tensor, which strict mode names
(``spmd-untyped-boundary``) where x's type was known.  A loop over axes
written out around the call is one call per axis (:mod:`.axis_loops`).
"""

from __future__ import annotations

from typing import Callable

from mypy.nodes import ARG_NAMED, ARG_POS, CallExpr, DictExpr, Expression, RefExpr
from mypy.plugin import FunctionContext
from mypy.types import Type

from spmd_mypy import errorcodes, report
from spmd_mypy.config import Config
from spmd_mypy.gradients import built_as_zeros, built_without_gradient
from spmd_mypy.representation import result_type, spmd_members, unknown_tensor, updated_members
from spmd_mypy.spmd_types_api.asserting import partly_unknown, source_text, tensor_argument
from spmd_mypy.spmd_types_api.reading import Site, axis_name, axis_type, site_of
from spmd_mypy.spmd_types_api.spelling import in_spmd_types_spelling
from spmd_stubs.core import AxisType, Code, Kind, SpmdTypeError, Step, Transition, backward_of, row_of
from spmd_stubs.core.comms import instead

Update = tuple[str, AxisType, AxisType]
"""One axis mutated: (axis, src, dst)."""

_RELABELS = frozenset({(Kind.V, Kind.P), (Kind.R, Kind.V)})
"""The pairs a relabel does as the spec's reinterpret does, with the value's meaning kept (module docstring)."""
_COPIES = (Kind.R, Kind.I)
_NO_REINTERPRET = {
    Kind.P: "a pending sum is resolved only by communication",
    Kind.V: "the ranks hold different data: gathering it is communication",
    Kind.I: "reading every rank's copy as one part of a sum would scale the value by the axis size",
}


def mutate_type_hook(settings: Config) -> Callable[[FunctionContext], Type]:
    """``spmd.mutate_type(x, axis, src=spmd.R, dst=spmd.V)``: x with ``dst`` on the mutated axes."""

    def hook(ctx: FunctionContext) -> Type:
        given = tensor_argument(ctx)
        site = site_of(ctx, settings)
        call = ctx.context
        if given is None or site is None or not isinstance(call, CallExpr):
            return ctx.default_return_type
        written = _arguments(call)
        updates = _updates(written, site, given) if written is not None else None
        if written is None or updates is None:
            if settings.strict and any(spmd_members(given)):
                _report_unread(ctx, source_text(ctx, relabelled(call)[0]) or "x", given)
            return unknown_tensor(ctx.api) or ctx.default_return_type
        tensor, first = relabelled(call)
        shown = source_text(ctx, tensor) or "x"
        axis_written = source_text(ctx, written["axis"]) if "axis" in written else None
        gradient_free = built_without_gradient(tensor, first, ctx.api)
        zeros = gradient_free and built_as_zeros(tensor, first, ctx.api)
        for axis, src, dst in updates:
            if _known_on(given, axis) and not zeros and not (gradient_free and _same_data(src, dst)):
                _check_relabel(ctx, shown, axis_written or f'"{axis}"', axis, src, dst)

        checked = not partly_unknown(given)

        def mutate(mapping: dict[str, AxisType]) -> None:
            for axis, src, dst in updates:
                actual = mapping.get(axis)
                if checked and actual is not None and actual.local != src.local:
                    report.fail(ctx.api, ctx.context,
                                f"spmd.mutate_type says src={src} on axis {axis} but the value is {actual.on(axis)}. "
                                f"Fix: src=spmd.{actual.local} (the value's type), then check that "
                                f"{actual.local}->{dst.local} is the change you mean.",
                                errorcodes.BY_RULE[Code.ASSERT])
                mapping[axis] = dst.local

        return result_type(ctx.api, given, updated_members(given, mutate))

    return hook


def relabelled(call: CallExpr) -> tuple[Expression, CallExpr]:
    """The tensor a ``mutate_type`` call relabels, and the call that reads it: through the nested calls a run
    of relabels of one name is written as (:mod:`.narrowing`)."""
    while call.args and isinstance(call.args[0], CallExpr) and isinstance(call.args[0].callee, RefExpr) \
            and call.args[0].callee.fullname.rpartition(".")[2] == "mutate_type":
        call = call.args[0]
    return call.args[0], call


def _report_unread(ctx: FunctionContext, shown: str, given: Type) -> None:
    """Strict mode: a typed value whose relabel is not read leaves the call unknown."""
    known = [t for t in dict.fromkeys(spmd_members(given)) if t is not None]
    axes = sorted({axis for t in known for axis, _ in t.axes})
    written = ", ".join(f'"{axis}"' for axis in axes) + ("," if len(axes) == 1 else "")
    report.fail(ctx.api, ctx.context,
                f"spmd.mutate_type's axis, src or dst is not written out: {shown} ({' | '.join(map(str, known))}) "
                f"is unknown after it. Fix: write them out: one call per axis, or a loop over the axes written out "
                f"(for axis in ({written}):) with src and dst spmd.R, I, V, P or S(k).", errorcodes.UNTYPED_BOUNDARY)


def _known_on(given: Type, axis: str) -> bool:
    """Whether every member of ``given`` has a known type on ``axis``: a relabel of a value the checker does
    not know there is a declaration of it, as an ``assert_type`` of it is (the gradual boundary it sits on is
    where strict mode reports)."""
    known = spmd_members(given)
    return bool(known) and all(t is not None and t.get(axis) is not None for t in known)


def _same_data(src: AxisType, dst: AxisType) -> bool:
    """Whether a value of type ``src`` is a value of type ``dst`` as data, gradients aside (copies read as R, I or V)."""
    return src.local.kind in _COPIES and dst.local.kind in (*_COPIES, Kind.V)


def _arguments(call: CallExpr) -> dict[str, Expression] | None:
    """``x``, ``axis``, ``src`` and ``dst`` as written; None where one is starred or unexpected."""
    names = ("x", "axis")
    found: dict[str, Expression] = {}
    for index, (arg, kind, name) in enumerate(zip(call.args, call.arg_kinds, call.arg_names)):
        if kind == ARG_POS and index < len(names):
            found[names[index]] = arg
        elif kind == ARG_NAMED and name in ("axis", "src", "dst"):
            found[name] = arg
        else:
            return None
    return found if {"x", "src", "dst"} <= found.keys() else None


def _updates(written: dict[str, Expression], site: Site, given: Type) -> list[Update] | None:
    """Every (axis, src, dst) the call mutates; None where one is not known."""
    src, dst = written["src"], written["dst"]
    if isinstance(src, DictExpr) or isinstance(dst, DictExpr):
        sources, targets = _per_axis(src, site), _per_axis(dst, site)
        if "axis" in written or sources is None or targets is None:
            return None
        if isinstance(sources, dict) and isinstance(targets, dict):
            return [(axis, sources[axis], targets[axis]) for axis in targets] if set(sources) == set(targets) else None
        if isinstance(targets, dict):
            assert isinstance(sources, AxisType)
            return [(axis, sources, target) for axis, target in targets.items()]
        assert isinstance(sources, dict)
        return [(axis, source, targets) for axis, source in sources.items()]
    source, target = axis_type(src, site), axis_type(dst, site)
    if source is None or target is None:
        return None
    if "axis" in written:
        axis = axis_name(written["axis"], site)
        return [(axis, source, target)] if axis is not None else None
    known = set(spmd_members(given))
    whole = known.pop() if len(known) == 1 else None
    return [(axis, source, target) for axis, _ in whole.axes] if whole is not None else None


def _per_axis(expr: Expression, site: Site) -> dict[str, AxisType] | AxisType | None:
    """``src`` or ``dst``: a dict ``{axis: type}`` with every entry read, or one type; None where unknown."""
    if not isinstance(expr, DictExpr):
        return axis_type(expr, site)
    found: dict[str, AxisType] = {}
    for key, value in expr.items:
        axis = axis_name(key, site) if key is not None else None
        typ = axis_type(value, site)
        if axis is None or typ is None:
            return None
        found[axis] = typ
    return found


def _check_relabel(ctx: FunctionContext, shown: str, axis_written: str, axis: str, src: AxisType,
                   dst: AxisType) -> None:
    """``spmd-runtime-rule`` where relabelling ``src`` as ``dst`` is not the spec's reinterpret (module docstring)."""
    before, after = src.local, dst.local
    if before == after or (before.kind, after.kind) in _RELABELS:
        return
    step = Step("reinterpret", before, after)
    try:
        row: Transition | None = row_of(step)
    except KeyError:
        row = None
    if row is not None and row.backward != "reinterpret":
        why = (f"the SPMD spec's reinterpret({before},{after}) runs {backward_of(step.op, before, after)} on the "
               f"gradient, the relabel runs nothing")
        fix = step.call(axis, expert=row.gated)
    elif row is not None:
        why = (f"each rank's copy becomes one part of a sum, the value times the axis size (the spec's "
               f"reinterpret({before},{after}) needs expert_mode=True)")
        fix = f"{instead(before, after, axis)}, which keeps the value, or {step.call(axis, expert=True)} if you mean it"
    else:
        why = f"the SPMD spec has no reinterpret({before},{after}): {_NO_REINTERPRET[before.kind]}"
        fix = f"{instead(before, after, axis)} where the value is {before.on(axis)}"
    spelled = in_spmd_types_spelling(SpmdTypeError(Code.INVALID_TRANSITION, axis, fix), axis_written).message
    message = (f"spmd.mutate_type relabels {before.on(axis)} as {after.on(axis)} on axis {axis}, which spmd_types "
               f"runs and the spec refuses: {why}. Fix: {shown} = {spelled.replace('(x, ', f'({shown}, ')}.")
    report.fail(ctx.api, ctx.context, message, errorcodes.RUNTIME_RULE)
