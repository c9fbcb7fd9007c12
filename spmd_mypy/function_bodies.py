"""Inside a hand-written autograd Function's ``forward`` or ``backward``: forward values only.

autograd records nothing in these bodies (torch runs them with gradients
off): the gradient contract is the one the Function declares
(:mod:`spmd_mypy.autograd`).  Three things follow (docs/spec.md#function-bodies):

* **Raw collectives are the implementation.**  A raw torch.distributed
  collective there is how the body makes the transition it declares, not a
  gradient the checker loses, so it is not reported; where its ``group=``
  names a mesh axis (:func:`spmd_mypy.groups.axis_of_group`; no ``group=``, the world, is no single axis of a Function's types) it types its
  result by the same table as the typed collectives (:data:`BODY_COLLECTIVES`).
* **No operand carries a gradient**, so the rule for Invariant, a gradient
  rule, does not apply to the body's own ops (Megatron's fused linears
  compute ``I @ V`` in backward): :func:`spmd_mypy.gradients.implementation`.  The rules
  for Partial, about forward values, do.
* **A returned value matches its declared type** where a reinterpretation
  without communication relates them (:func:`spmd_stubs.core.returns_as`):
  R and I either way, R or I declared V or S(i), V declared P.  So a
  backward annotated ``P@tp -> I@tp`` that forgets its all-reduce is
  mypy's return error, and ``return input_`` from ``I@tp -> R@tp`` is not.

The raw collective's data after a sum or a gather is the same on every
rank, which R and I both say; it is I where the method's declared result
is I on the axis (and nowhere R), else R.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from mypy.checker import TypeChecker
from mypy.nodes import Context, Expression, FuncDef, FuncItem, NameExpr, TupleExpr
from mypy.plugin import FunctionContext
from mypy.types import CallableType, TupleType, Type, get_proper_type

from spmd_mypy import untyped_boundaries
from spmd_mypy.call_arguments import Argument, arguments, int_value, sums
from spmd_mypy.config import AxisNames, Config
from spmd_mypy.fullnames import AUTOGRAD_FUNCTION, RAW_COLLECTIVE_MODULES
from spmd_mypy.global_mode import regions
from spmd_mypy.gradients import BODIES, current_function, implementation
from spmd_mypy.groups import group_axis
from spmd_mypy.representation import (
    members,
    result_type,
    spmd_members,
    spmd_of,
    tensor_instance,
    typed_tensors_in,
    union_of,
    unknown_tensor,
    with_spmd,
)
from spmd_mypy.statements import class_of
from spmd_mypy.transitions import Request, apply
from spmd_mypy.trivial_axes import TrivialAxes, may_test_size, trivial_axes
from spmd_mypy.wrappers import wrapped_value
from spmd_stubs import core
from spmd_stubs.core import AxisType, Invariant, Partial, Replicate, Shard, SpmdTypeError, Varying


@dataclass(frozen=True)
class BodyCollective:
    """A raw collective as a Function body uses it: the typed transition it makes, and where its result lands."""

    op: str
    reads: str
    """The parameter holding the input."""
    writes: str | None
    """The output buffer the result is written into (a plain variable, retyped); None: the call's result."""
    src: AxisType
    dst: AxisType
    reduction: str = "op"
    """The parameter naming the reduction (only a sum is typed)."""
    dim: str | None = None
    """The parameter giving the shard dim of ``src`` or ``dst`` (the functional forms), else dim 0."""


_C10D, _FUNCTIONAL = RAW_COLLECTIVE_MODULES
_GATHER_INTO = BodyCollective("all_gather", "input_tensor", "output_tensor", Shard(0), Replicate)
_REDUCE_SCATTER_INTO = BodyCollective("reduce_scatter", "input", "output", Partial, Shard(0))
BODY_COLLECTIVES: dict[str, BodyCollective] = {
    # in place: dist.all_reduce(t, group=g); return t
    f"{_C10D}all_reduce": BodyCollective("all_reduce", "tensor", "tensor", Partial, Replicate),
    # into a buffer: dist.all_gather_into_tensor(out, t, group=g); return out
    f"{_C10D}all_gather_into_tensor": _GATHER_INTO,
    f"{_C10D}_all_gather_base": _GATHER_INTO,
    f"{_C10D}reduce_scatter_tensor": _REDUCE_SCATTER_INTO,
    f"{_C10D}_reduce_scatter_base": _REDUCE_SCATTER_INTO,
    f"{_C10D}all_to_all_single": BodyCollective("all_to_all", "input", "output", Varying, Varying),
    # into a list, one tensor per rank: each the same on every rank
    f"{_C10D}all_gather": BodyCollective("all_gather", "tensor", "tensor_list", Varying, Replicate),
    # the functional collectives return their result
    f"{_FUNCTIONAL}all_reduce": BodyCollective("all_reduce", "self", None, Partial, Replicate, "reduceOp"),
    f"{_FUNCTIONAL}all_gather_tensor": BodyCollective("all_gather", "self", None, Shard(0), Replicate, dim="gather_dim"),
    f"{_FUNCTIONAL}reduce_scatter_tensor": BodyCollective(
        "reduce_scatter", "self", None, Partial, Shard(0), "reduceOp", "scatter_dim"
    ),
    f"{_FUNCTIONAL}all_to_all_single": BodyCollective("all_to_all", "self", None, Varying, Varying),
}
"""The raw collectives whose result a Function body follows, by full name."""


def collective_result(ctx: FunctionContext, fullname: str, declared: AxisNames) -> Type:
    """The raw collective's result type, its output buffer retyped for the rest of the block (module docstring).

    A call this cannot type (another reduction, an input not of the source
    type or not typed on the axis, a group that names no axis, an expression
    as the buffer) changes no type.
    """
    collective = BODY_COLLECTIVES.get(fullname)
    args = arguments(ctx)
    if collective is None or collective.reads not in args or not sums(args.get(collective.reduction)):
        return ctx.default_return_type
    tensor = args[collective.reads][1]
    group = args.get("group")
    axis = group_axis(ctx, group, declared) if group is not None else None
    inputs = spmd_members(tensor)
    if axis is None or not inputs or any(member is None or member.get(axis) is None for member in inputs):
        return ctx.default_return_type
    src, dst = _with_dim(collective, args)
    method = implementation(ctx.api)
    request = Request(collective.op, tensor, (axis,), src, _destination(dst, method, axis), False)
    misfits: list[SpmdTypeError] = []
    results = apply(request, misfits.append, regions.current_axes(ctx.api))
    if misfits:
        return ctx.default_return_type
    if collective.writes is None:  # the functional collectives, unannotated: their result a tensor
        return result_type(ctx.api, tensor_instance(ctx.default_return_type) or unknown_tensor(ctx.api)
                           or ctx.default_return_type, results)
    buffer, buffer_type = args.get(collective.writes, (None, None))
    if isinstance(buffer, NameExpr) and buffer_type is not None:
        checker: TypeChecker = ctx.api  # type: ignore[assignment]
        checker.binder.put(buffer, result_type(ctx.api, buffer_type, results))
    return ctx.default_return_type


def _with_dim(collective: BodyCollective, args: dict[str, Argument]) -> tuple[AxisType, AxisType]:
    """``src`` and ``dst``, the shard among them on the dim the call names (``gather_dim=-1``)."""
    given = args.get(collective.dim) if collective.dim is not None else None
    dim = int_value(given[0]) if given is not None else None
    if dim is None:
        return collective.src, collective.dst
    return tuple(Shard(dim) if side.shard is not None else side for side in (collective.src, collective.dst))  # type: ignore[return-value]


def _destination(dst: AxisType, method: FuncItem | None, axis: str) -> AxisType:
    """``dst``, or I where it is R and the method's declared result is I on ``axis`` and nowhere R."""
    declared = method.type.ret_type if method is not None and isinstance(method.type, CallableType) else None
    returned = {member.get(axis) for member in typed_tensors_in(declared)} if declared is not None else set()
    if dst == Replicate and Invariant in returned and Replicate not in returned:
        return Invariant
    return dst


# --------------------------------------------------------------------------
# Returns: the value as declared where a reinterpretation relates them
# --------------------------------------------------------------------------

def wraps_returns(function: FuncDef, sizes: AxisNames) -> bool:
    """Whether ``function``'s returned values are judged by :func:`returned_hook` (:mod:`spmd_mypy.wrappers`):
    its declared result has SPMD types, and it is a Function's ``forward``/``backward`` or it may test an
    axis's size (:func:`spmd_mypy.trivial_axes.may_test_size`)."""
    if not (isinstance(function.type, CallableType) and typed_tensors_in(function.type.ret_type)):
        return False
    owner = class_of(function)
    in_body = function.name in BODIES and owner is not None and owner.has_base(AUTOGRAD_FUNCTION)
    return in_body or may_test_size(function, sizes)


def returned_hook(settings: Config) -> Callable[[FunctionContext], Type]:
    """Hook for ``<returned>(value)``: a Function body's value as declared where a reinterpretation relates
    each of its tensors to the declared one, else as it is (so mypy's return error shows the value's own
    types); elsewhere, in strict mode, a typed value returned where the declared return forgets it.  In a
    branch where an axis has one rank, or where it skipped a branch that runs only where an axis has more
    (:mod:`spmd_mypy.trivial_axes`), the value takes the declared type on that axis first."""

    def hook(ctx: FunctionContext) -> Type:
        value, found = wrapped_value(ctx)
        function = current_function(ctx.api)
        declared = function.type.ret_type if function is not None and isinstance(function.type, CallableType) else None
        if declared is not None and function is not None:
            trivial = trivial_axes(ctx.context, value, function, ctx.api, settings)  # type: ignore[arg-type]
            found = _on_trivial_axes(ctx.api, found, declared, value, trivial) if trivial else found
        method = implementation(ctx.api)
        if method is not None and declared is not None:
            read = _as_declared(found, declared)
            return read if read is not None else found
        if settings.strict and isinstance(function, FuncDef):
            untyped_boundaries.check_return(ctx.api, value, function, found)
        return found

    return hook


def _on_trivial_axes(api: object, found: Type, declared: Type, value: Context | None, trivial: TrivialAxes) -> Type:
    """``found``, the type of ``value``, with each tensor's type on its trivial axes the declared one's (a tuple
    item by item)."""
    found_proper, declared_proper = get_proper_type(found), get_proper_type(declared)
    if isinstance(found_proper, TupleType) and isinstance(declared_proper, TupleType):
        count = len(found_proper.items)
        if count != len(declared_proper.items):
            return found
        values = value.items if isinstance(value, TupleExpr) and len(value.items) == count else [None] * count
        items = [_on_trivial_axes(api, f, d, v, trivial)
                 for f, d, v in zip(found_proper.items, declared_proper.items, values)]
        return found_proper.copy_modified(items=items)
    wanted = next((t for t in (spmd_of(member) for member in members(declared)) if t is not None), None)
    if wanted is None:
        return found
    read = []
    for member in members(found):
        tensor_type, tensor = spmd_of(member), tensor_instance(member)
        item = value if isinstance(value, Expression) else None
        axes = trivial.of(item, tensor_type) if tensor_type is not None else set()
        if tensor_type is None or tensor is None or not axes:
            read.append(member)
            continue
        kept = [(axis, t) for axis, t in tensor_type.axes if axis not in axes]
        taken = [(axis, t) for axis, t in wanted.axes if axis in axes]
        read.append(with_spmd(api, tensor, core.TensorType(tuple(kept + taken))))
    return union_of(read)


def _as_declared(found: Type, declared: Type) -> Type | None:
    """``found`` read as ``declared`` (a tuple item by item); None where some tensor cannot be."""
    found_proper, declared_proper = get_proper_type(found), get_proper_type(declared)
    if (isinstance(found_proper, TupleType) and isinstance(declared_proper, TupleType)
            and len(found_proper.items) == len(declared_proper.items)):
        items = [_as_declared(f, d) for f, d in zip(found_proper.items, declared_proper.items)]
        return None if None in items else found_proper.copy_modified(items=items)  # type: ignore[arg-type]
    candidates = [(member, spmd_of(member)) for member in members(declared)]
    read = [_member_as_declared(member, candidates) for member in members(found)]
    return None if None in read else union_of(read)  # type: ignore[arg-type]


def _member_as_declared(member: Type, candidates: Sequence[tuple[Type, core.TensorType | None]]) -> Type | None:
    """The first declared tensor type a returned tensor may be read as (an untyped one: itself); else None."""
    found = spmd_of(member)
    if found is None:
        return member
    for candidate, declared in candidates:
        if declared is not None and all(
            core.returns_as(found_type, declared_type)
            for axis, declared_type in declared.axes
            if (found_type := found.get(axis)) is not None
        ):
            return candidate
    return None
