"""``redistribute`` between partition specs: ``redistribute(x, (S(0)@(dp, tp),), (R@dp, R@tp))``.

The one-axis form, ``redistribute(x, axis, src=, dst=)``, is a typed
collective like the others (:mod:`spmd_mypy.typed_collectives`).
"""

from __future__ import annotations

from mypy.nodes import Expression, ListExpr, TupleExpr
from mypy.plugin import FunctionContext
from mypy.types import Type

from spmd_mypy import report
from spmd_mypy.annotations import AnnotationError
from spmd_mypy.call_arguments import annotation_entries, bad_type_argument
from spmd_mypy.global_mode import boundaries
from spmd_mypy.representation import result_type, updated_members
from spmd_stubs.core import AxisType, Code, SpmdTypeError, TensorType


def between_specs(ctx: FunctionContext) -> Type:
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
        return bad_type_argument(ctx, error)
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
    from spmd_stubs.core import planner  # loaded already by between_specs, the only caller

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
