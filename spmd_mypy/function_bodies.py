"""Raw collectives in a hand-written autograd Function's ``forward`` or ``backward``: its implementation.

autograd records nothing inside these bodies: the gradient contract is the
one the Function declares (:mod:`spmd_mypy.autograd`), and a raw
torch.distributed collective there is how the body makes the transition it
declares, not a gradient the checker loses.  So it is not reported.

Where the collective writes a buffer named by a plain variable and its
``group=`` names a mesh axis (:func:`spmd_mypy.groups.axis_of_group`), the
variable's type afterwards is what the collective made of the input on that
axis, for the rest of the block, as an assignment would make it:

* ``all_reduce(t)`` (a sum): ``t`` from P to R;
* ``all_gather_into_tensor(out, t)``, ``_all_gather_base(out, t)``: ``out``
  is ``t`` from S(0) (or V) to R;
* ``reduce_scatter_tensor(out, t)``, ``_reduce_scatter_base(out, t)`` (a
  sum): ``out`` is ``t`` from P to S(0).

R and I hold the same data, the same on every rank; they differ only in
their gradients, which the Function declares.  So a result the method
declares I on the axis (and nowhere R) is I instead of R.  Anything else
(another reduction, an input not of the source type or not typed on the
axis, a group naming no axis, an expression as the buffer) changes no type:
a gradient returned without its collective is then mypy's own return error.
"""

from __future__ import annotations

from dataclasses import dataclass

from mypy.checker import TypeChecker
from mypy.nodes import Expression, FuncItem, MypyFile, NameExpr
from mypy.plugin import FunctionContext
from mypy.types import CallableType, Type

from spmd_mypy.autograd import FUNCTION
from spmd_mypy.collectives import Request, apply, arguments, sums
from spmd_mypy.config import GroupDeclarations
from spmd_mypy.global_mode import regions
from spmd_mypy.groups import axis_of_group
from spmd_mypy.representation import result_type, spmd_members, typed_tensors_in
from spmd_stubs.core import AxisType, Invariant, Partial, Replicate, Shard, SpmdTypeError

_BODIES = ("forward", "backward")


@dataclass(frozen=True)
class Writes:
    """A raw collective that writes its result into a buffer: the typed transition it makes there."""

    op: str
    writes: str
    reads: str
    src: AxisType
    dst: AxisType


_ALL_GATHER = Writes("all_gather", "output_tensor", "input_tensor", Shard(0), Replicate)
_REDUCE_SCATTER = Writes("reduce_scatter", "output", "input", Partial, Shard(0))
WRITES: dict[str, Writes] = {
    "all_reduce": Writes("all_reduce", "tensor", "tensor", Partial, Replicate),
    "all_gather_into_tensor": _ALL_GATHER,
    "_all_gather_base": _ALL_GATHER,
    "reduce_scatter_tensor": _REDUCE_SCATTER,
    "_reduce_scatter_base": _REDUCE_SCATTER,
}
"""The raw collectives whose buffer's type a Function body follows, by name."""


def function_body(ctx: FunctionContext) -> FuncItem | None:
    """The ``forward`` or ``backward`` of a ``torch.autograd.Function`` subclass the call is directly in, if any."""
    scope = getattr(ctx.api, "scope", None)
    method = scope.current_function() if scope is not None else None
    if scope is None or method is None or method.name not in _BODIES:
        return None
    owner = scope.enclosing_class(method)
    return method if owner is not None and owner.has_base(FUNCTION) else None


def follow_buffer(ctx: FunctionContext, name: str, method: FuncItem, declared: GroupDeclarations) -> None:
    """Narrow the buffer the raw collective ``name`` writes to the type it has afterwards (module docstring)."""
    collective = WRITES.get(name)
    args = arguments(ctx)
    if collective is None or collective.writes not in args or collective.reads not in args:
        return
    (buffer, buffer_type), tensor = args[collective.writes], args[collective.reads][1]
    axis = _axis(args.get("group"), declared, ctx.api.tree)  # type: ignore[attr-defined]
    if not isinstance(buffer, NameExpr) or axis is None or not sums(args.get("op")):
        return
    inputs = spmd_members(tensor)
    if not inputs or any(member is None or member.get(axis) is None for member in inputs):
        return
    request = Request(collective.op, tensor, (axis,), collective.src, _destination(collective.dst, method, axis), False)
    misfits: list[SpmdTypeError] = []
    results = apply(request, misfits.append, regions.current_axes(ctx.api))
    if not misfits:
        checker: TypeChecker = ctx.api  # type: ignore[assignment]
        checker.binder.put(buffer, result_type(buffer_type, results))


def _axis(group: tuple[Expression, Type] | None, declared: GroupDeclarations, tree: MypyFile) -> str | None:
    """The mesh axis ``group=`` names; None without one (the world is no single axis of a Function's types)."""
    return axis_of_group(group[0], declared, tree) if group is not None else None


def _destination(dst: AxisType, method: FuncItem, axis: str) -> AxisType:
    """``dst``, or I where it is R and the method's declared result is I on ``axis`` and nowhere R."""
    declared = method.type.ret_type if isinstance(method.type, CallableType) else None
    returned = {member.get(axis) for member in typed_tensors_in(declared)} if declared is not None else set()
    if dst == Replicate and Invariant in returned and Replicate not in returned:
        return Invariant
    return dst
