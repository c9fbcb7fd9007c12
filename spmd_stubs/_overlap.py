"""A typed collective with ``async_op=True``: started now, its result (and autograd node) at ``wait()``.

The call's site, checks and kernel are the synchronous call's
(:mod:`spmd_stubs._dispatch`); only the waiting moves.  The kernel runs
:func:`spmd_stubs._comm.left_in_flight`, so its collective is started by
torch asynchronously and nothing waits for it; :class:`Pending`'s
``wait()`` blocks on it, then records the same autograd node the
synchronous call records (:class:`_Arrived`), whose backward is the same
``backward_of`` plan, run synchronously when the gradient arrives.
"""

from __future__ import annotations

import functools
from typing import Optional, Sequence

import torch
import torch.autograd.forward_ad as forward_ad
import torch.distributed as dist

from spmd_stubs._collective_args import backend_error
from spmd_stubs._comm import Length, left_in_flight, received
from spmd_stubs._dispatch import _Bound, _Site, _site
from spmd_stubs._tracing import traced
from spmd_stubs._validation import between_real_ranks
from spmd_stubs.mesh import AxisLike
from spmd_stubs.pending import Pending
from spmd_stubs.types import SpmdTypeLike

__all__ = ["start_collective", "start_exchange"]


def start_collective(
    op: str,
    x: torch.Tensor,
    axis: AxisLike,
    src: SpmdTypeLike,
    dst: SpmdTypeLike,
    *,
    split_sizes: Optional[Sequence[int]] = None,
    group: Optional[dist.ProcessGroup] = None,
    average: bool = False,
) -> Pending[torch.Tensor]:
    """``op(x, axis, src=src, dst=dst, ...)`` with ``async_op=True``: the synchronous call's checks, then :func:`start`."""
    site = collective_site(op, axis, src, dst, split_sizes=split_sizes, group=group, average=average)
    site.check(x)
    return start(site, x)


def start_exchange(
    x: torch.Tensor,
    axis: AxisLike,
    src: SpmdTypeLike,
    dst: SpmdTypeLike,
    group: Optional[dist.ProcessGroup],
    input_split_sizes: Optional[Sequence[Length]],
    output_split_sizes: Optional[Sequence[Length]],
) -> Pending[torch.Tensor]:
    """The uneven ``all_to_all(V, V)`` with ``async_op=True``: the synchronous call's checks, then :func:`start`."""
    site = collective_site("all_to_all", axis, src, dst, group=group, rows=True)
    return start(site.rows_bound(x, input_split_sizes, output_split_sizes), x)


def collective_site(
    op: str,
    axis: AxisLike,
    src: SpmdTypeLike,
    dst: SpmdTypeLike,
    *,
    split_sizes: Optional[Sequence[int]] = None,
    group: Optional[dist.ProcessGroup] = None,
    average: bool = False,
    rows: bool = False,
) -> _Site:
    """The site of a collective call, the one the synchronous call uses (the same cache key; ``rows``:
    an uneven ``all_to_all``'s, which binds each call's row counts)."""
    sizes = None if split_sizes is None else tuple(split_sizes)
    args = (op, axis, src, dst, False, sizes, group, average, False)
    site = _site((*args, True) if rows else args)
    assert isinstance(site, _Site), "a collective's site, never a cast's unchanged one"
    return site


def start(bound: _Bound, x: torch.Tensor) -> Pending[torch.Tensor]:
    """``bound.apply(x)`` with its communication left in flight: the Pending's ``wait()`` gives what
    ``apply`` gives, recorded for autograd as ``apply`` records it.

    Whether a gradient is recorded is decided by the grad mode of the start.
    The simulated world and traced code (where torch has no real async) and
    calls inside a forward-mode level (whose tangent needs the communication
    too) complete at once: their Pending is done when returned.
    """
    if traced() or forward_ad._current_level >= 0 or not between_real_ranks(x):
        return Pending.done(bound.apply(x))
    recording = x.requires_grad and torch.is_grad_enabled()
    with left_in_flight(), torch.no_grad():
        y = bound.run(x.detach(), straight=False)
    return Pending((), functools.partial(_arrive, bound, x, y, recording))


def _arrive(bound: _Bound, x: torch.Tensor, y: torch.Tensor, recording: bool) -> torch.Tensor:
    """The end of :func:`start`: ``y`` once its communication is done, made of ``x`` as ``bound.apply`` makes it."""
    try:
        y = received(y)
    except RuntimeError as error:
        raise backend_error(bound.plan.step, bound.comm.axis, x, error) from error
    with torch.set_grad_enabled(recording):
        return _Arrived(bound, y).apply(x)


class _Arrived(_Bound):
    """``bound`` whose first run gives ``result``, what its communication started earlier received.

    Recorded for autograd as ``bound`` would be: the node's backward is
    ``bound``'s plan's backward (later runs, the backward's and a double
    backward's, communicate as usual).
    """

    __slots__ = ("_result",)

    def __init__(self, bound: _Bound, result: torch.Tensor) -> None:
        super().__init__(bound.plan, bound.comm, bound.divisor, bound.rows)
        self._result: Optional[torch.Tensor] = result

    def run(self, x: torch.Tensor, straight: bool = True) -> torch.Tensor:
        result, self._result = self._result, None
        return super().run(x, straight) if result is None else result
