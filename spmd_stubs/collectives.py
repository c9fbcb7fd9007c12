"""Typed, differentiable collectives and casts (docs/spec.md#transitions).

Every function takes the tensor, the mesh axis (or a tuple of axes: one
collective on the flattened group, see :mod:`spmd_stubs.mesh`) and the
``src``/``dst`` local SPMD types (``R``, ``I``, ``V``, ``P`` or ``S(i)``).
Other mesh axes pass through unchanged.

* Validity is the algebra's: an invalid or gated ``src``/``dst`` raises
  :class:`spmd_stubs.core.SpmdTypeError` (a ``ValueError``) with the same
  message the type checker prints.
* The backward of every operation is the operation
  :func:`spmd_stubs.core.backward_of` names, run through the same kernels
  (:mod:`spmd_stubs._kernels`), so each table cell has one forward kernel and
  no hand-written backward.

Diagrams (docs/spec.md#forward-and-backward): one row per rank of a 3-rank axis, ``=>``
forward, ``<=`` backward (``grad_input <= grad_output``), a value written on
one row only is the same on every rank, ``+`` marks the parts of a pending sum.
V stacks/unbinds on a new leading dim; ``S(i)`` concatenates/splits on dim i.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional, Sequence, TypeVar, cast, overload

import torch
import torch.distributed as dist

from spmd_stubs import core
from spmd_stubs._collective_args import (
    backend_error,
    check_averageable,
    check_live,
    check_member,
    checked_split_sizes,
    is_spec,
    spec_of,
)
from spmd_stubs._comm import eager
from spmd_stubs._kernels import KERNELS, Comm, Kernel, partial_share
from spmd_stubs._validation import check_agreement, validating
from spmd_stubs.core import AxisType, Kind, Step, planner
from spmd_stubs.mesh import AxisLike, axes_label, binding_cache, group_and_size, group_of, mesh_dim_order
from spmd_stubs.types import AxisAnnotation, P, SpmdTypeLike, to_axis_type

__all__ = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "reinterpret",
    "convert",
    "redistribute",
]

_T = TypeVar("_T")


# --------------------------------------------------------------------------
# The one generic mechanism
# --------------------------------------------------------------------------


def _memoized(fn: Callable[..., _T]) -> Callable[..., _T]:
    """``fn`` cached for eager calls, traced as is under ``torch.compile``.

    For pure functions of hashable arguments.  Under compile the cost is paid
    once per trace anyway, and dynamo traces through a cache only with a warning.
    """
    cached = functools.lru_cache(maxsize=4096)(fn)

    @functools.wraps(fn)
    def call(*args: Any) -> _T:
        return fn(*args) if torch.compiler.is_compiling() else cached(*args)

    return call


@dataclass(frozen=True, eq=False)
class _Plan:
    """A valid step with its per-call work done once: kernel and backward step.

    One plan per step (:func:`_plan` is memoized), so plans compare and hash
    by identity, which is quick (a dataclass hash runs in Python).
    """

    step: Step
    kernel: Kernel
    backward: Step
    passthrough: bool
    """A reinterpret whose backward is a reinterpret: the result is the input itself.

    (A reinterpret never changes the local tensor; ``reinterpret(V,P)``,
    ``(R,V)`` and ``(R,P)`` have such backwards, all the way down.)
    """
    moves_nothing: bool
    """The forward is the identity: where no gradient is recorded, the result is the input."""
    share: Optional[str] = None
    """``"max"``/``"min"`` when the step resolves a pending max/min: ``backward``
    is then the sum's, and its result is split among the ranks attaining the
    extremum (:func:`spmd_stubs._kernels.partial_share`)."""

    def run(self, x: torch.Tensor, comm: Comm, divisor: int) -> torch.Tensor:
        try:
            y = self.kernel(x, comm, self.step.src, self.step.dst)
        except RuntimeError as error:
            # No check of its own (comparing shapes across ranks would cost a
            # collective per call): the backend's error, given the call's context.
            raise backend_error(self.step, comm.axis, x, error) from error
        return y if divisor == 1 else y / divisor


@_memoized
def _plan(step: Step) -> _Plan:
    step = _canonical(step)
    share = step.src.reduce if step.src.extremum else None
    # A pending max/min's gradient is the sum's, split by ``share`` afterwards.
    summed = Step(step.op, core.Partial, step.dst) if share else step
    backward = _canonical(core.backward_of(summed.op, summed.src, summed.dst))
    kernel = KERNELS[core.row_of(step).kernel]
    passthrough = step.op == backward.op == "reinterpret"
    return _Plan(step, kernel, backward, passthrough, kernel is KERNELS["identity"], share)


@_memoized
def _backward_plan(plan: _Plan) -> _Plan:
    """``plan``'s backward plan, looked up by the plan's identity (no hash of its step)."""
    return _plan(plan.backward)


def _canonical(step: Step) -> Step:
    """``all_reduce``/``reduce_scatter`` of V is ``reinterpret(V,P)`` then src=P.

    That reinterpret's forward is the identity and its backward
    (``reinterpret(R,V)``) too, so folding it in changes no value.
    """
    if step.op in core.IMPLICIT_PARTIAL and step.src.kind is Kind.V:
        return Step(step.op, core.Partial, step.dst)
    return step


@_memoized
def _validated(op: str, src: AxisType, dst: AxisType, label: str, expert_mode: bool) -> Optional[_Plan]:
    """``op(src, dst)``'s plan on axis ``label`` (None: nothing to do), or the algebra's error.

    Validity depends on the types only, never on the tensor, so an eager call
    site checks once (errors are not cached: raised every time).
    """
    core.transition(op, src, dst, label, expert_mode)
    if op in core.CASTS and src == dst:
        return None  # a cast to the type it already has
    return _plan(Step(op, src, dst))


class _Typed(torch.autograd.Function):
    """One typed operation: the table's kernel forward, ``backward_of`` backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, plan: _Plan, comm: Comm, divisor: int) -> torch.Tensor:
        ctx.plan, ctx.comm, ctx.divisor = plan, comm, divisor
        y = plan.run(x, comm, divisor)
        if plan.share:
            ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Optional[torch.Tensor], None, None, None]:
        # Through _apply: the backward is differentiable too (create_graph=True).
        # Dividing by a constant is self-adjoint, so op="avg" keeps its divisor.
        back = _backward_plan(ctx.plan)
        out = _apply(grad, back, ctx.comm, ctx.divisor)
        if ctx.plan.share:
            x, y = ctx.saved_tensors
            # The extremum in x's layout: all_reduce's result is, reduce_scatter's gathers.
            whole = y if ctx.plan.step.op == "all_reduce" else back.run(y.detach(), ctx.comm, 1)
            out = out * partial_share(x.detach(), whole.detach(), ctx.comm, ctx.plan.share)
        return out, None, None, None


_record = cast("Callable[[torch.Tensor, _Plan, Comm, int], torch.Tensor]", _Typed.apply)
"""``_Typed.apply``, which torch leaves unannotated."""


def _apply(x: torch.Tensor, plan: _Plan, comm: Comm, divisor: int) -> torch.Tensor:
    """``plan`` on ``x``, recorded for autograd only where a gradient can flow.

    An identity forward returns ``x`` itself where no node is recorded (the
    raw code's ``return x``; a view would share its storage all the same),
    and where the backward is a reinterpret too, whose node would pass the
    gradient through unchanged.
    """
    recording = torch.is_grad_enabled() and x.requires_grad
    if divisor == 1 and (plan.passthrough if recording else plan.moves_nothing):
        return x
    if recording:
        return _record(x, plan, comm, divisor)
    return plan.run(x, comm, divisor)


@dataclass(frozen=True)
class _Site:
    """One distinct call (operation, axis, src, dst, options), its type-level work done.

    What is left per call depends on the tensor or on the moment: the process
    group still being alive, an average's dtype, validation mode's exchange.
    """

    op: str
    plan: Optional[_Plan]
    """None: a cast to the type ``x`` already has, which returns ``x``."""
    comm: Optional[Comm]
    divisor: int
    averages: bool

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.plan is None or self.comm is None:
            return x
        check_live(self.op, self.comm.axis)
        if self.averages:
            check_averageable(x, self.op, self.comm.axis)
        if validating() and eager(x):
            check_agreement(self.plan.step, self.comm, x)
        return _apply(x, self.plan, self.comm, self.divisor)


def _site(
    op: str,
    axis: AxisLike,
    src: AxisType,
    dst: AxisType,
    expert_mode: bool = False,
    split_sizes: Optional[Sequence[int]] = None,
    group: Optional[dist.ProcessGroup] = None,
    average: bool = False,
) -> _Site:
    """The :class:`_Site` of ``op(x, axis, src=src, dst=dst, ...)``, or the call's error."""
    label = axes_label(axis)
    plan = _validated(op, src, dst, label, expert_mode)
    if plan is None:
        return _Site(op, None, None, 1, False)
    # A pending avg resolves as the sum divided by the axis size, like op="avg".
    averages = average or src.reduce == "avg"
    pg, size = group_and_size(axis) if group is None else (group, dist.get_world_size(group))
    check_live(op, label)
    if group is not None:
        check_member(group, op, label)
    comm = Comm(pg, size, checked_split_sizes(split_sizes, size, label, src, dst), label)
    return _Site(op, plan, comm, size if averages else 1, averages)


_MAX_SITES = 4096
"""Distinct calls kept; beyond, the cache starts afresh (calls with ever new ``split_sizes``)."""

_sites: dict[tuple[Any, ...], _Site] = binding_cache()
"""A call's arguments but the tensor -> its site; emptied by every (un)binding (a site holds its group)."""


def _typed(
    op: str,
    x: torch.Tensor,
    axis: AxisLike,
    src: SpmdTypeLike,
    dst: SpmdTypeLike,
    *,
    expert_mode: bool = False,
    split_sizes: Optional[Sequence[int]] = None,
    group: Optional[dist.ProcessGroup] = None,
    average: bool = False,
) -> torch.Tensor:
    """``op`` on ``x`` with the user's ``src``/``dst``; an eager call's site is worked out once.

    Under ``torch.compile`` the site is traced afresh (dynamo guards on what
    traced code reads from a dict, and the trace runs once anyway).
    """
    sizes = None if split_sizes is None else tuple(split_sizes)
    args = (op, axis, src, dst, expert_mode, sizes, group, average)
    if torch.compiler.is_compiling():
        return _site_of(*args)(x)
    try:
        site = _sites[args]
    except KeyError:
        site = _site_of(*args)
        if len(_sites) >= _MAX_SITES:
            _sites.clear()
        _sites[args] = site
    except TypeError:  # an unhashable argument: _site_of says what is wrong with it
        site = _site_of(*args)
    return site(x)


def _site_of(op: str, axis: AxisLike, src: SpmdTypeLike, dst: SpmdTypeLike, *options: Any) -> _Site:
    """:func:`_site` with the user's ``src``/``dst`` (``R``, ``S(0)``) turned into the algebra's types."""
    return _site(op, axis, to_axis_type(src), to_axis_type(dst), *options)


# --------------------------------------------------------------------------
# Collectives
# --------------------------------------------------------------------------


def all_reduce(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike = P,
    dst: SpmdTypeLike,
    op: Literal["sum", "avg"] = "sum",
    group: Optional[dist.ProcessGroup] = None,
) -> torch.Tensor:
    """``all_reduce(x, axis, src=P, dst=R|I)``: resolve the pending sum on every rank.

    ``src=V`` is accepted and means ``reinterpret(V,P)`` first.  ``op="avg"``
    divides the sum by the axis size; its backward is the sum's backward
    divided by the same size (scaling is self-adjoint).  ``src=Pavg`` is that
    average.  ``src=Pmax``/``Pmin`` reduce with max/min; the backward is the
    sum's (``dst=R``: summed over the axis; ``dst=I``: as is), then only the
    ranks whose part attains the result get it, ``k`` tying ranks ``1/k``
    each, as ``torch.amax``'s backward splits ties.

    Forward, both dsts::

        +Ax
        +Ay  =>  Ax + Ay + Az
        +Az

    ``dst=R``: backward ``all_reduce(P,R)`` (self-dual)::

                          +Ax
        Ax + Ay + Az  <=  +Ay
                          +Az

    ``dst=I``: backward ``reinterpret(I,R)``, the identity (Megatron's
    ``reduce_from_tensor_model_parallel_region``)::

        A  <=  A
    """
    if op not in ("sum", "avg"):
        raise ValueError(f'all_reduce op must be "sum" or "avg", got {op!r}')
    if op == "avg" and to_axis_type(src).reduce != "sum":
        raise ValueError(f'all_reduce op="avg" averages a pending sum; src={src!r} already names its reduction')
    return _typed("all_reduce", x, axis, src, dst, group=group, average=op == "avg")


def all_gather(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike,
    dst: SpmdTypeLike,
    split_sizes: Optional[Sequence[int]] = None,
    group: Optional[dist.ProcessGroup] = None,
) -> torch.Tensor:
    """``all_gather(x, axis, src=V|S(i), dst=R|I)``: every rank gets all the parts.

    ``src=V`` stacks the parts on a new dim 0; ``src=S(i)`` concatenates on
    dim i, with part k of size ``split_sizes[k]`` when given (uneven shards).

    Forward::

        A                          [A0, A1]
        B  =>  [A, B, C]           [B0, B1]  =>  [A0, A1, B0, B1, C0, C1]
        C      (src=V)             [C0, C1]      (src=S(0))

    ``dst=R``: backward ``reduce_scatter(P, src)``::

        Ax + Ay + Az      +[Ax, Bx, Cx]
        Bx + By + Bz  <=  +[Ay, By, Cy]
        Cx + Cy + Cz      +[Az, Bz, Cz]

    ``dst=I``: backward ``convert(I, src)``, each rank keeps its slice::

        A
        B  <=  [A, B, C]
        C
    """
    return _typed("all_gather", x, axis, src, dst, split_sizes=split_sizes, group=group)


def reduce_scatter(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike = P,
    dst: SpmdTypeLike,
    split_sizes: Optional[Sequence[int]] = None,
    group: Optional[dist.ProcessGroup] = None,
) -> torch.Tensor:
    """``reduce_scatter(x, axis, src=P, dst=V|S(i))``: rank k gets part k of the sum.

    ``dst=V`` unbinds dim 0 (of size the axis size); ``dst=S(i)`` splits dim i,
    into ``split_sizes`` when given.  ``src=V`` means ``reinterpret(V,P)`` first.
    ``src=Pavg|Pmax|Pmin`` reduce with avg/max/min; their backwards are the
    sum's, scaled by ``1/n`` (avg) or split among the ranks attaining the
    extremum (max/min), as in :func:`all_reduce`.

    Forward (``dst=V``)::

        +[Ax, Bx, Cx]      Ax + Ay + Az
        +[Ay, By, Cy]  =>  Bx + By + Bz
        +[Az, Bz, Cz]      Cx + Cy + Cz

    Backward ``all_gather(dst, R)``::

                       A
        [A, B, C]  <=  B
                       C
    """
    return _typed("reduce_scatter", x, axis, src, dst, split_sizes=split_sizes, group=group)


def all_to_all(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike,
    dst: SpmdTypeLike,
    group: Optional[dist.ProcessGroup] = None,
) -> torch.Tensor:
    """``all_to_all(x, axis, src=V, dst=V)`` or ``(src=S(i), dst=S(j))``.

    ``(V, V)`` transposes the mesh axis with local dim 0 (of size the axis
    size); ``(S(i), S(j))`` unshards dim i and reshards dim j without
    materialising the whole.  Backward: ``all_to_all(dst, src)``.

    ``(V, V)`` forward; the backward is the same transpose::

        [A0, A1, A2]      [A0, B0, C0]
        [B0, B1, B2]  =>  [A1, B1, C1]
        [C0, C1, C2]      [A2, B2, C2]
    """
    return _typed("all_to_all", x, axis, src, dst, group=group)


# --------------------------------------------------------------------------
# Casts: no communication in the forward
# --------------------------------------------------------------------------


def reinterpret(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike,
    dst: SpmdTypeLike,
    expert_mode: bool = False,
    group: Optional[dist.ProcessGroup] = None,
) -> torch.Tensor:
    """``reinterpret(x, axis, src, dst)``: same local tensor, new type (may change the meaning).

    Valid: ``I->R`` (backward ``all_reduce(P,I)``), ``I->V`` (backward
    ``all_reduce(V,I)``), ``V->P`` (backward ``reinterpret(R,V)``), and with
    ``expert_mode=True``: ``R->I`` (backward ``convert(I,P)``), ``R->V``
    (backward ``reinterpret(V,P)``), ``R->P`` (self-dual; scales the meaning
    by the axis size).  ``V->Pavg|Pmax|Pmin``: the parts of a pending
    avg/max/min (backward the identity).  Shards are not accepted: a
    reinterpret moves no data.

    ``reinterpret(V,P)``::

        A      +A                A
        B  =>  +B    backward    A  <=  A
        C      +C                A

    ``reinterpret(R,P)`` (expert)::

               +A                +A
        A  =>  +A    backward    +A  <=  A
               +A                +A

    ``reinterpret(I,R)``::

        A  =>  A     backward    Ax + Ay + Az  <=  +Ax, +Ay, +Az
    """
    return _typed("reinterpret", x, axis, src, dst, expert_mode=expert_mode, group=group)


def convert(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike,
    dst: SpmdTypeLike,
    expert_mode: bool = False,
    split_sizes: Optional[Sequence[int]] = None,
    group: Optional[dist.ProcessGroup] = None,
) -> torch.Tensor:
    """``convert(x, axis, src, dst)``: new type, same meaning, no communication.

    Valid: ``R->V|S(i)`` and ``I->V|S(i)`` (rank k keeps part k; backwards
    ``convert(V,P)`` and ``all_gather(V,I)``), ``R->P`` (rank 0 keeps the
    value, the others hold zeros; self-dual), ``I->R`` (identity; backward
    ``all_reduce(P,I)``: Megatron's ``copy_to_tensor_model_parallel_region``),
    and with ``expert_mode=True``: ``I->P`` (backward ``reinterpret(R,I)``),
    ``V|S(i)->P`` (zero-pad; backward ``convert(R,V)``), ``R->I`` (backward
    ``convert(I,P)``).  ``R->Pavg|Pmax|Pmin``: every rank keeps the value, the
    avg/max/min of copies being the value (backward the identity).
    ``split_sizes`` gives uneven ``S(i)`` parts.

    ``convert(R,V)``::

                       A                   +[A, 0, 0]      A
        [A, B, C]  =>  B      backward     +[0, B, 0]  <=  B
                       C                   +[0, 0, C]      C

    ``convert(I,S(0))``::

                                      [A0, A1]
        [A0, A1, B0, B1, C0, C1]  =>  [B0, B1]     backward: all_gather(S(0), I)
                                      [C0, C1]

    ``convert(R,P)``::

                 +[A]                 +[A]
        [A]  =>  +[0]     backward    +[0]  <=  [A]
                 +[0]                 +[0]

    ``convert(V,P)`` (expert)::

        A      +[A, 0, 0]                A
        B  =>  +[0, B, 0]     backward   B  <=  [A, B, C]
        C      +[0, 0, C]                C
    """
    return _typed("convert", x, axis, src, dst, expert_mode=expert_mode, split_sizes=split_sizes, group=group)


@overload
def redistribute(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike,
    dst: SpmdTypeLike,
    group: Optional[dist.ProcessGroup] = None,
) -> torch.Tensor: ...


@overload
def redistribute(x: torch.Tensor, src: Sequence[AxisAnnotation], dst: Sequence[AxisAnnotation], /) -> torch.Tensor: ...


def redistribute(
    x: torch.Tensor,
    axis: Any,
    dst_spec: Optional[Sequence[AxisAnnotation]] = None,
    *,
    src: Optional[SpmdTypeLike] = None,
    dst: Optional[SpmdTypeLike] = None,
    group: Optional[dist.ProcessGroup] = None,
) -> torch.Tensor:
    """Change the type keeping the meaning, communicating where needed.

    ``redistribute(x, tp, src=R, dst=S(0))``: one axis (or a flattened
    tuple).  Routes through :func:`spmd_stubs.core.route` (``all_gather``
    for ``S(i)->R|I``, ``all_reduce`` for ``P->R|I``, ``reduce_scatter`` for
    ``P->S(i)``, ``all_to_all`` for ``S(i)->S(j)``, ``convert`` for the rest)
    and passes ``expert_mode=True``: redistributing is intentional.

    ``redistribute(x, (S(0)@(dp, tp),), (R@dp, R@tp))``: between two
    partition specs (tuples of ``TYPE@axis``; axes left out of both pass
    through).  :func:`spmd_stubs.core.planner.plan` picks the steps, flattening
    same-kind steps on several axes into one collective (here one
    ``all_gather`` over ``(dp, tp)``), and each runs as the typed operation,
    so gradients flow through their backwards.  See docs/redistribute.md.
    """
    if dst_spec is not None or is_spec(axis):
        if src is not None or dst is not None or group is not None:
            raise TypeError(
                "redistribute(x, src_spec, dst_spec) takes the two partition specs only, e.g. "
                "redistribute(x, (S(0)@(dp, tp),), (R@dp, R@tp)); src=/dst=/group= belong to the "
                "per-axis form redistribute(x, tp, src=..., dst=...)"
            )
        return _redistribute_specs(x, axis, dst_spec)
    if src is None or dst is None:
        raise TypeError("redistribute(x, axis, src=..., dst=...) needs both src and dst")
    step = core.route(to_axis_type(src), to_axis_type(dst), axes_label(axis))
    if step is None:
        return x
    return _site(step.op, axis, step.src, step.dst, expert_mode=True, group=group)(x)


def _redistribute_specs(x: torch.Tensor, src_spec: Any, dst_spec: Any) -> torch.Tensor:
    axes: dict[str, Any] = {}
    src, dst = spec_of(src_spec, "src", axes), spec_of(dst_spec, "dst", axes)
    sizes = {name: dist.get_world_size(group_of(axis)) for name, axis in axes.items()}
    steps = planner.plan(src, dst, sizes=sizes, ndim=x.dim(), mesh_order=mesh_dim_order(tuple(axes)))
    for step in steps:
        group = tuple(axes[name] for name in step.axes)
        x = _site(step.op, group if len(group) > 1 else group[0], step.src, step.dst, expert_mode=True)(x)
    return x
