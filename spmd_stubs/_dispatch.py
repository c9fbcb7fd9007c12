"""How a typed collective runs: one autograd Function for every cell of the table, dispatched per call site.

A call's type-level work (validity, the plan of kernels, the group, the
``Comm``) depends on its arguments but not the tensor, so it is done once per
distinct eager call site (:class:`_Site`) and reused until the next
(un)binding of the mesh; :mod:`spmd_stubs.collectives` is the public surface
over it.  An uneven all-to-all's row counts change from call to call (a
mixture of experts routes afresh every step), so its site leaves them out
and each call binds its own (:meth:`_Site.exchange`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, cast

import torch
import torch.autograd.forward_ad as forward_ad
import torch.distributed as dist

from spmd_stubs import _validation, core
from spmd_stubs._collective_args import (
    backend_error,
    check_averageable,
    check_member,
    check_rows_sent,
    checked_rows,
    checked_split_sizes,
    no_forward_mode,
    no_process_group,
    not_differentiable,
)
from spmd_stubs._comm import (
    Length,
    Rows,
    exchange_rows,
    group_exchange_rows,
    never_registered,
    registered,
    straight_to_group,
)
from spmd_stubs._kernels import IN_PLACE_KERNELS, KERNELS, Comm, Kernel, direct_run, partial_share
from spmd_stubs._tracing import memoized, traced
from spmd_stubs._validation import between_real_ranks, check_agreement
from spmd_stubs.core import AxisType, Kind, Step
from spmd_stubs.core.comms import check_row_exchange
from spmd_stubs.mesh import AxisLike, axes_label, binding_cache, group_and_size
from spmd_stubs.types import SpmdTypeLike, to_axis_type


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


@memoized
def _plan(step: Step) -> _Plan:
    step = _canonical(step)
    share = step.src.reduce if step.src.extremum else None
    # A pending max/min's gradient is the sum's, split by ``share`` afterwards.
    summed = Step(step.op, core.Partial, step.dst) if share else step
    backward = _canonical(core.backward_of(summed.op, summed.src, summed.dst))
    kernel = KERNELS[core.row_of(step).kernel]
    passthrough = step.op == backward.op == "reinterpret"
    return _Plan(step, kernel, backward, passthrough, kernel is KERNELS["identity"], share)


@memoized
def _in_place(plan: _Plan) -> _Plan:
    """``plan`` with its kernel's in-place form (``all_reduce_``)."""
    return dataclasses.replace(plan, kernel=IN_PLACE_KERNELS[core.row_of(plan.step).kernel])


@memoized
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


@memoized
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
    def forward(ctx: Any, x: torch.Tensor, bound: _Bound) -> torch.Tensor:
        ctx.bound = bound
        y = bound.run(x)
        if bound.divisor != 1:
            y = y / bound.divisor
        if bound.plan.share:
            ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Optional[torch.Tensor], None]:
        # Through apply: the backward is differentiable too (create_graph=True).
        bound: _Bound = ctx.bound
        back = bound.backward
        out = back.apply(grad)
        if bound.plan.share:
            x, y = ctx.saved_tensors
            # The extremum in x's layout: all_reduce's result is, reduce_scatter's gathers.
            whole = y if bound.plan.step.op == "all_reduce" else back.run(y.detach())
            out = out * partial_share(x.detach(), whole.detach(), back.comm, bound.plan.share)
        return out, None


class _TypedWithTangent(_Typed):
    """:class:`_Typed` with a forward-mode derivative, for calls inside a ``forward_ad`` level.

    A class apart because dynamo cannot trace a Function that defines ``jvp``:
    compiled code, outside any such level, records :class:`_Typed`.
    """

    @staticmethod
    def jvp(ctx: Any, tangent: torch.Tensor, _bound: None) -> torch.Tensor:
        # Every plan but a pending max or min is linear: the tangent takes the same plan.
        bound: _Bound = ctx.bound
        if bound.plan.share:
            raise no_forward_mode(bound.plan.step, bound.comm.axis)
        out = bound.run(tangent)
        return out if bound.divisor == 1 else out / bound.divisor


_record = cast("Callable[[torch.Tensor, _Bound], torch.Tensor]", _Typed.apply)
"""``_Typed.apply``, which torch leaves unannotated."""
_record_with_tangent = cast("Callable[[torch.Tensor, _Bound], torch.Tensor]", _TypedWithTangent.apply)
_unpack_dual = cast("Callable[[torch.Tensor], tuple[torch.Tensor, Optional[torch.Tensor]]]", forward_ad.unpack_dual)
"""``forward_ad.unpack_dual``: (primal, tangent or None), which torch leaves unannotated."""


class _Bound:
    """A plan on its group: what a recorded :class:`_Typed` node holds (an eager call's site itself).

    ``divisor`` divides the result: an average's group size, else 1.
    ``direct``: the plan's kernel bound to the group, for eager calls that
    go straight to it (none where the bound is made under ``torch.compile``,
    whose traced code takes the kernel, nor for kernels without one).
    ``rows``: an uneven ``all_to_all(V, V)``'s row counts, which it
    exchanges in place of the kernel's equal parts.
    """

    __slots__ = ("plan", "comm", "divisor", "direct", "rows", "_backward")

    def __init__(self, plan: _Plan, comm: Comm, divisor: int, rows: Optional[Rows] = None) -> None:
        self.plan, self.comm, self.divisor, self.rows = plan, comm, divisor, rows
        bound = rows is None and not traced()
        self.direct = direct_run(plan.kernel, comm, plan.step.src, plan.step.dst) if bound else None
        self._backward: Optional[_Bound] = None

    @property
    def backward(self) -> _Bound:
        """The backward's plan on the same group, with the same divisor (scaling is self-adjoint).

        Made on the first eager backward and kept, so an eager site's nodes
        share it; made afresh under ``torch.compile`` (compiled autograd
        included), whose traced code must neither mutate it nor take the
        kept one's direct path.
        """
        if traced():
            return self._backward_bound()
        back = self._backward
        if back is None:
            back = self._backward = self._backward_bound()
        return back

    def _backward_bound(self) -> _Bound:
        # The gradient of an uneven exchange's rows goes back where they came from.
        rows = None if self.rows is None else self.rows.reversed()
        return _Bound(_backward_plan(self.plan), self.comm, self.divisor, rows)

    def run(self, x: torch.Tensor, straight: bool = True) -> torch.Tensor:
        """The plan's kernel on ``x`` (not divided), straight to the group where it can be and ``straight`` says."""
        direct = self.direct
        try:
            if self.rows is not None:
                return exchange_rows(x, self.comm.group, self.rows)
            if straight and direct is not None and straight_to_group(x):
                rows = direct.rows
                if rows is None or (x.ndim and not x.shape[0] % rows):
                    return direct.run(x)
            step = self.plan.step
            return self.plan.kernel(x, self.comm, step.src, step.dst)
        except (RecursionError, NotImplementedError):
            raise  # the program's (a tensor subclass's handler) or a missing kernel's, not ranks disagreeing
        except RuntimeError as error:
            # No check of its own (comparing shapes across ranks would cost a
            # collective per call): the backend's error, given the call's context.
            raise backend_error(self.plan.step, self.comm.axis, x, error) from error

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """The plan on ``x``, recorded for autograd only where a gradient can flow.

        An identity forward returns ``x`` itself where no node is recorded (the
        raw code's ``return x``; a view would share its storage all the same),
        and where the backward is a reinterpret too, whose node would pass the
        gradient through unchanged.
        """
        plan = self.plan
        # Inside a forward-mode level x may carry a tangent, which only a node's jvp communicates.
        tangents = forward_ad._current_level >= 0
        # The tensor's flag first: a gradient (the backward's input) is answered by one C call.
        recording = (x.requires_grad and torch.is_grad_enabled()) or tangents
        if self.divisor == 1 and (plan.passthrough if recording else plan.moves_nothing):
            return x
        if recording:
            return _record_with_tangent(x, self) if tangents else _record(x, self)
        y = self.run(x)
        return y if self.divisor == 1 else y / self.divisor


class _Site(_Bound):
    """One distinct call (operation, axis, src, dst, options), its type-level work done.

    Calling it does what is left per call, which depends on the tensor or on
    the moment: the process group still being alive, an average's dtype,
    validation mode's exchange; then the plan.
    """

    __slots__ = ("op", "averages", "reduction", "registered")

    def __init__(
        self, op: str, plan: _Plan, comm: Comm, divisor: int, averages: bool, reduction: Optional[str]
    ) -> None:
        super().__init__(plan, comm, divisor)
        self.op, self.averages = op, averages
        # all_reduce's op= as written, which validation mode compares: a pending avg is in the plan's src.
        self.reduction = reduction
        # Chosen once: a site made under torch.compile is traced and read afresh.
        self.registered = never_registered if traced() else registered

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """The call on ``x``."""
        self.check(x)
        return self.apply(x)

    def check(self, x: torch.Tensor) -> None:
        """What a call checks before it runs: the group alive, an average's dtype, validation mode's exchange."""
        if not (self.registered(self.comm.group) or dist.is_initialized()):
            raise no_process_group(self.op, self.comm.axis)
        if self.averages:
            check_averageable(x, self.op, self.comm.axis)
        if _validation.active and between_real_ranks(x):
            check_agreement(self.plan.step, self.comm, x, self.reduction)

    def exchange(
        self,
        x: torch.Tensor,
        input_split_sizes: Optional[Sequence[Length]],
        output_split_sizes: Optional[Sequence[Length]],
    ) -> torch.Tensor:
        """The uneven ``all_to_all(V, V)`` on ``x`` (a site made with ``rows=True``), with this call's row counts.

        An eager call on real ranks that records nothing for autograd, outside
        validation mode, whose counts (a list or tuple) pass every check
        :meth:`rows_bound` makes, goes straight to the group: the
        checks are C builtins on the counts as given, and no ``Rows`` or
        ``_Bound`` is made.  The token dispatch changes its counts every call,
        so this is what it pays per call where the raw call pays
        ``torch.distributed``'s wrapper.  Any other call takes
        :meth:`rows_bound`, which says what is wrong.
        """
        comm = self.comm
        sent, received = input_split_sizes, output_split_sizes
        if (
            # Never a site made under torch.compile (never_registered): traced calls take the checked path.
            self.registered(comm.group)
            and not _validation.active
            and not (x.requires_grad and torch.is_grad_enabled())
            and forward_ad._current_level < 0
            # Before the counts are compared: a simulated rank's are SymInts, whose comparison asks every rank.
            and straight_to_group(x)
            and isinstance(sent, (list, tuple))
            and isinstance(received, (list, tuple))
            and len(sent) == comm.size == len(received)
            and min(sent) >= 0
            and min(received) >= 0
            and x.ndim
            and x.shape[0] == sum(sent)
        ):
            try:
                # Eager on real ranks every count is an int (a SymInt comes of a simulated tensor only).
                return group_exchange_rows(comm.group, received, sent, x)  # type: ignore[arg-type]
            except (RecursionError, NotImplementedError):
                raise  # as in _Bound.run
            except RuntimeError as error:
                raise backend_error(self.plan.step, comm.axis, x, error) from error
        return self.rows_bound(x, sent, received).apply(x)

    def rows_bound(
        self,
        x: torch.Tensor,
        input_split_sizes: Optional[Sequence[Length]],
        output_split_sizes: Optional[Sequence[Length]],
    ) -> _Bound:
        """The plan bound to this call's row counts, after each check in turn (:func:`checked_rows`,
        validation mode's exchange, :func:`check_rows_sent`)."""
        comm = self.comm
        eager = between_real_ranks(x)
        rows = checked_rows(input_split_sizes, output_split_sizes, comm.size, comm.axis, eager)
        if not (self.registered(comm.group) or dist.is_initialized()):
            raise no_process_group(self.op, comm.axis)
        if _validation.active and eager:
            check_agreement(self.plan.step, comm, x, self.reduction, rows)
        check_rows_sent(x, rows, comm.axis)
        return _Bound(self.plan, comm, 1, rows)


class _InPlaceSite(_Site):
    """A site of ``all_reduce_``: the result written over ``x``, which is returned.

    Never recorded for autograd (the in-place form is for gradients, which
    have none of their own): a tensor that requires a gradient is refused.
    """

    __slots__ = ()

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        if x.requires_grad and torch.is_grad_enabled():
            raise not_differentiable(self.op, self.plan.step, self.comm.axis)
        if forward_ad._current_level >= 0 and _unpack_dual(x)[1] is not None:
            raise not_differentiable(self.op, self.plan.step, self.comm.axis, tangent=True)
        y = self.run(x)
        return y if self.divisor == 1 else y.div_(self.divisor)


def _unchanged(x: torch.Tensor) -> torch.Tensor:
    """The site of a cast to the type ``x`` already has."""
    return x


Site = Callable[[torch.Tensor], torch.Tensor]


def call_site(
    op: str,
    axis: AxisLike,
    src: AxisType,
    dst: AxisType,
    expert_mode: bool = False,
    split_sizes: Optional[Sequence[int]] = None,
    group: Optional[dist.ProcessGroup] = None,
    average: bool = False,
    in_place: bool = False,
    rows: bool = False,
) -> Site:
    """The site of ``op(x, axis, src=src, dst=dst, ...)`` (what to call on ``x``), or the call's error.

    ``in_place``: ``op_``, which writes the result over ``x`` (``all_reduce_`` only).
    ``rows``: an uneven ``all_to_all``'s, whose calls bind their row counts
    (:meth:`_Site.exchange`); its src and dst must take them (V to V).
    """
    label = axes_label(axis)
    plan = _validated(op, src, dst, label, expert_mode)
    if rows:
        check_row_exchange(src, dst, label)
    if plan is None:
        return _unchanged
    # A pending avg resolves as the sum divided by the axis size, like op="avg".
    averages = average or src.reduce == "avg"
    pg, size = group_and_size(axis) if group is None else (group, dist.get_world_size(group))
    if not dist.is_initialized():
        raise no_process_group(op, label)
    if group is not None:
        check_member(group, op, label)
    comm = Comm(pg, size, checked_split_sizes(split_sizes, size, label, src, dst), label)
    divisor = size if averages else 1
    reduction = ("avg" if average else "sum") if op == "all_reduce" else None
    if in_place:
        return _InPlaceSite(f"{op}_", _in_place(plan), comm, divisor, averages, reduction)
    return _Site(op, plan, comm, divisor, averages, reduction)


_MAX_SITES = 4096
"""Distinct calls kept; beyond, the cache starts afresh (calls with ever new ``split_sizes``)."""

_sites: dict[tuple[Any, ...], Site] = binding_cache()
"""A call's arguments but the tensor -> its site; emptied by every (un)binding (a site holds its group)."""


def typed_call(
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
    in_place: bool = False,
) -> torch.Tensor:
    """``op`` on ``x`` with the user's ``src``/``dst``; an eager call's site is worked out once.

    Under ``torch.compile`` the site is traced afresh (dynamo guards on what
    traced code reads from a dict, and the trace runs once anyway).
    """
    sizes = None if split_sizes is None else tuple(split_sizes)
    args = (op, axis, src, dst, expert_mode, sizes, group, average, in_place)
    # The lookup of _site, written out: the call it saves is a tenth of a microsecond on every collective.
    if traced():
        return _site_of(*args)(x)
    try:
        site = _sites[args]
    except KeyError:
        site = _new_site(args)
    except TypeError:  # an unhashable argument: _site_of says what is wrong with it
        site = _site_of(*args)
    return site(x)


def typed_exchange(
    x: torch.Tensor,
    axis: AxisLike,
    src: SpmdTypeLike,
    dst: SpmdTypeLike,
    group: Optional[dist.ProcessGroup],
    input_split_sizes: Optional[Sequence[Length]],
    output_split_sizes: Optional[Sequence[Length]],
) -> torch.Tensor:
    """An uneven ``all_to_all(x, axis, src=V, dst=V, ...)``: its site (``rows=True``) worked out once, as
    :func:`typed_call`'s, and this call's row counts bound to it (:meth:`_Site.exchange`)."""
    site = _site(("all_to_all", axis, src, dst, False, None, group, False, False, True))
    assert isinstance(site, _Site), "a collective's site, never a cast's unchanged one"
    return site.exchange(x, input_split_sizes, output_split_sizes)


def _site(args: tuple[Any, ...]) -> Site:
    """The site of a call's arguments but the tensor: cached for eager calls."""
    if traced():
        return _site_of(*args)
    try:
        return _sites[args]
    except KeyError:
        return _new_site(args)
    except TypeError:  # an unhashable argument: _site_of says what is wrong with it
        return _site_of(*args)


def _new_site(args: tuple[Any, ...]) -> Site:
    """The site of a call not cached yet, cached."""
    site = _site_of(*args)
    if len(_sites) >= _MAX_SITES:
        _sites.clear()
    _sites[args] = site
    return site


def _site_of(op: str, axis: AxisLike, src: SpmdTypeLike, dst: SpmdTypeLike, *options: Any) -> Site:
    """:func:`call_site` with the user's ``src``/``dst`` (``R``, ``S(0)``) turned into the algebra's types."""
    return call_site(op, axis, to_axis_type(src), to_axis_type(dst), *options)
