"""Point-to-point on a mesh axis: a ring step, and the sends and receives of pipeline stages.

The peer of every operation is a rank of the same axis group, named either
relatively, ``offset=+1``/``-1`` (the next/previous rank on the axis,
wrapping around), or absolutely, ``rank=k`` (the rank whose index on the
axis is ``k``): exactly one of the two.

* :func:`ring_shift` (``V -> V``): every rank's block moves ``offset`` ranks
  ahead, as ring attention rotates its KV blocks; differentiable, its
  backward the gradient shifted by ``-offset``.
* :func:`send`/:func:`recv`, :func:`isend`/:func:`irecv` and
  :func:`batch_isend_irecv` with :class:`P2POp`: one stage's value (``V@pp``,
  each stage its own) to another.  Not recorded by autograd, which cannot
  span processes: a pipeline sends the gradient back itself, as
  megatron-core's schedules do (``send(y.grad, pp, offset=-1)``; the stage
  before receives it and calls ``activation.backward(grad)``).

A receive is spelled like the tensor it makes: ``recv(shape, dtype, axis,
...)``.  ``async_op=True``, ``isend``, ``irecv`` and ``batch_isend_irecv``
return :class:`spmd_stubs.pending.Pending` values whose ``wait()`` gives the
received tensor (None for a send).  Validation mode
(:func:`spmd_stubs.set_validation`) first exchanges a small header with each
peer: a receive posted with another shape or dtype than the send is a
``ValueError`` on both ranks naming both
(:func:`spmd_stubs._validation.check_transfers`); a peer that posts nothing
still waits until the process group's timeout.

Send and receive run between real ranks only; :func:`ring_shift` runs in the
simulated world and under ``torch.compile`` too, as an all-gather of which
each rank keeps the block ``offset`` ranks behind (the same values, ``n``
times the traffic), which completes at once.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Literal, Optional, Sequence, Union, cast, overload

import torch
import torch.distributed as dist

from spmd_stubs import _validation
from spmd_stubs._comm import all_gather_on, functional
from spmd_stubs._ranks import per_rank
from spmd_stubs._validation import Transfer, check_transfers
from spmd_stubs.mesh import AxisLike, axes_label, group_and_size
from spmd_stubs.pending import Pending

__all__ = ["P2POp", "batch_isend_irecv", "irecv", "isend", "recv", "ring_shift", "send"]

Shape = Union[torch.Size, Sequence[int]]


# --------------------------------------------------------------------------
# ring_shift: V -> V
# --------------------------------------------------------------------------


class _Ring:
    """A shift by ``shift`` ranks (``0 < shift < size``) on ``axis``'s group; ``result``: one started earlier."""

    __slots__ = ("group", "size", "shift", "axis", "result")

    def __init__(self, group: dist.ProcessGroup, size: int, shift: int, axis: str) -> None:
        self.group, self.size, self.shift, self.axis = group, size, shift, axis
        self.result: Optional[torch.Tensor] = None

    def reversed(self) -> _Ring:
        """The shift that brings every block back: the backward's."""
        return _Ring(self.group, self.size, self.size - self.shift, self.axis)

    def start(self, x: torch.Tensor) -> tuple[list[dist.Work], torch.Tensor]:
        """Send ``x`` ``shift`` ranks ahead, receive from ``shift`` behind: the work handles and the buffer."""
        if functional(x):
            # No point-to-point here: every block, of which this rank keeps the one shift ranks behind.
            every = all_gather_on(x.unsqueeze(0), 0, self.group, self.size)
            return [], per_rank(every, self.group, lambda k, t: t[(k - self.shift) % self.size].clone())
        me = dist.get_rank(self.group)
        ahead, behind = (me + self.shift) % self.size, (me - self.shift) % self.size
        if _validation.active:
            ends = [Transfer(True, ahead, tuple(x.shape), x.dtype), Transfer(False, behind, tuple(x.shape), x.dtype)]
            check_transfers(f"ring_shift(x, {self.axis}, offset={self.shift})", self.axis, self.group, ends)
        x = x.contiguous()
        out = torch.empty_like(x)
        ops = [
            dist.P2POp(dist.isend, x, group=self.group, group_peer=ahead),
            dist.P2POp(dist.irecv, out, group=self.group, group_peer=behind),
        ]
        return dist.batch_isend_irecv(ops), out

    def run(self, x: torch.Tensor) -> torch.Tensor:
        """The shift of ``x``, waited for (or the result of the one started earlier)."""
        result, self.result = self.result, None
        if result is not None:
            return result
        works, out = self.start(x)
        for work in works:
            work.wait()
        return out

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """The shift, recorded for autograd where a gradient can flow."""
        return _record(x, self) if x.requires_grad and torch.is_grad_enabled() else self.run(x)


class _RingShift(torch.autograd.Function):
    """A ring step: forward the shift, backward the reverse shift (through ``apply``: twice differentiable)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, ring: _Ring) -> torch.Tensor:
        ctx.ring = ring
        return ring.run(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return ctx.ring.reversed().apply(grad), None


_record = cast("Any", _RingShift.apply)


@overload
def ring_shift(x: torch.Tensor, axis: AxisLike, *, offset: int = 1, async_op: Literal[False] = False) -> torch.Tensor: ...


@overload
def ring_shift(x: torch.Tensor, axis: AxisLike, *, offset: int = 1, async_op: Literal[True]) -> Pending[torch.Tensor]: ...


def ring_shift(
    x: torch.Tensor, axis: AxisLike, *, offset: int = 1, async_op: bool = False
) -> Union[torch.Tensor, Pending[torch.Tensor]]:
    """``ring_shift(x, axis, offset=1)``: ``V -> V``, rank ``k``'s block goes to rank ``k + offset`` (mod n).

    Every rank sends its ``x`` and receives a block of the same shape and
    dtype (validation mode checks that).  Backward: the gradient shifted by
    ``-offset``.  An offset that is a multiple of the axis size returns
    ``x``.  ``async_op=True``: a :class:`Pending` whose ``wait()`` gives the
    shifted block, recorded for autograd as the call without it (the
    backward runs synchronously).  Forward, ``offset=1`` on 3 ranks;
    backward the same picture right to left::

        A      C
        B  =>  A
        C      B
    """
    group, size = group_and_size(axis)
    shift = offset % size
    if not shift:
        return Pending.done(x) if async_op else x
    ring = _Ring(group, size, shift, axes_label(axis))
    if not async_op:
        return ring.apply(x)
    if functional(x):
        return Pending.done(ring.apply(x))
    recording = x.requires_grad and torch.is_grad_enabled()
    with torch.no_grad():
        works, out = ring.start(x.detach())

    def arrive() -> torch.Tensor:
        ring.result = out
        with torch.set_grad_enabled(recording):
            return ring.apply(x)

    return Pending(works, arrive)


# --------------------------------------------------------------------------
# send / recv between stages
# --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class P2POp:
    """One send or receive of :func:`batch_isend_irecv`: make it with :meth:`send` or :meth:`recv`.

    ``tensor`` is what a send sends, or the buffer a receive fills (a new
    one, never readable before its ``Pending``'s ``wait()``).
    """

    sends: bool
    tensor: torch.Tensor
    axis: AxisLike
    offset: Optional[int] = None
    rank: Optional[int] = None

    @classmethod
    def send(cls, x: torch.Tensor, axis: AxisLike, *, offset: Optional[int] = None, rank: Optional[int] = None) -> P2POp:
        """Send ``x`` to the peer on ``axis`` (``offset=`` or ``rank=``)."""
        return cls(True, x, axis, offset, rank)

    @classmethod
    def recv(
        cls,
        shape: Shape,
        dtype: torch.dtype,
        axis: AxisLike,
        *,
        offset: Optional[int] = None,
        rank: Optional[int] = None,
        device: Union[torch.device, str] = "cpu",
    ) -> P2POp:
        """Receive a tensor of ``shape`` and ``dtype`` from the peer on ``axis`` (``offset=`` or ``rank=``)."""
        return cls(False, torch.empty(tuple(shape), dtype=dtype, device=device), axis, offset, rank)


def _peer(axis: AxisLike, offset: Optional[int], rank: Optional[int], call: str) -> tuple[dist.ProcessGroup, int]:
    """The group of ``axis`` and the peer's index on it, or what is wrong with ``offset``/``rank``."""
    label = axes_label(axis)
    if (offset is None) == (rank is None):
        raise TypeError(
            f"{call} on axis {label} takes exactly one peer: offset=+1/-1 (the next/previous rank on {label}) "
            f"or rank=k (the rank whose index on {label} is k)"
        )
    group, size = group_and_size(axis)
    me = dist.get_rank(group)
    peer = (me + offset) % size if offset is not None else cast(int, rank)
    if not 0 <= peer < size or peer == me:
        said = f"offset={offset}" if offset is not None else f"rank={rank}"
        raise ValueError(
            f"{call} on axis {label}: {said} names {'this rank itself' if peer == me else 'no rank'} "
            f"(index {me} of {size} on {label}); name another rank: rank= in [0, {size}) other than {me}, "
            f"or an offset that is not a multiple of {size}"
        )
    return group, peer


def batch_isend_irecv(ops: Sequence[P2POp]) -> list[Pending[Optional[torch.Tensor]]]:
    """Start every send and receive of ``ops`` at once (as ``torch.distributed.batch_isend_irecv``):
    one :class:`Pending` per op, in order, whose ``wait()`` gives a receive's tensor, None for a send.

    Both ends must list their transfers with each other in the same order.
    Between real ranks only: the simulated world is one process.
    """
    peers = [_peer(op.axis, op.offset, op.rank, "send" if op.sends else "recv") for op in ops]
    for op in ops:
        if functional(op.tensor):
            raise ValueError(
                f"send/recv on axis {axes_label(op.axis)} run between real ranks, not in the simulated world or "
                f"under torch.compile; use ring_shift there, or run the stages as processes"
            )
    if _validation.active:
        for group, label in {id(g): (g, axes_label(op.axis)) for op, (g, _) in zip(ops, peers)}.values():
            ends = [Transfer(op.sends, peer, tuple(op.tensor.shape), op.tensor.dtype) for op, (g, peer) in zip(ops, peers) if g is group]
            check_transfers("send/recv", label, group, ends)
    tensors = [op.tensor.detach().contiguous() for op in ops]
    torch_ops = [
        dist.P2POp(dist.isend if op.sends else dist.irecv, tensor, group=group, group_peer=peer)
        for op, tensor, (group, peer) in zip(ops, tensors, peers)
    ]
    works = dist.batch_isend_irecv(torch_ops)
    # One work per op where the backend issues them one by one; else each waits on them all.
    per_op = [[work] for work in works] if len(works) == len(ops) else [works] * len(ops)
    return [
        Pending(op_works, functools.partial(_result, None if op.sends else tensor))
        for op, tensor, op_works in zip(ops, tensors, per_op)
    ]


def _result(received: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """What a transfer's ``wait()`` gives: the received tensor, None for a send."""
    return received


def isend(x: torch.Tensor, axis: AxisLike, *, offset: Optional[int] = None, rank: Optional[int] = None) -> Pending[None]:
    """Start sending ``x`` to the peer on ``axis``; ``wait()`` (None) once it is sent.  ``x`` must not change before."""
    return cast("Pending[None]", batch_isend_irecv([P2POp.send(x, axis, offset=offset, rank=rank)])[0])


def irecv(
    shape: Shape,
    dtype: torch.dtype,
    axis: AxisLike,
    *,
    offset: Optional[int] = None,
    rank: Optional[int] = None,
    device: Union[torch.device, str] = "cpu",
) -> Pending[torch.Tensor]:
    """Start receiving a tensor of ``shape``/``dtype`` from the peer on ``axis``; ``wait()`` gives it."""
    op = P2POp.recv(shape, dtype, axis, offset=offset, rank=rank, device=device)
    return cast("Pending[torch.Tensor]", batch_isend_irecv([op])[0])


def send(x: torch.Tensor, axis: AxisLike, *, offset: Optional[int] = None, rank: Optional[int] = None) -> None:
    """Send ``x`` to the peer on ``axis`` (``offset=`` or ``rank=``) and wait until it is sent."""
    isend(x, axis, offset=offset, rank=rank).wait()


def recv(
    shape: Shape,
    dtype: torch.dtype,
    axis: AxisLike,
    *,
    offset: Optional[int] = None,
    rank: Optional[int] = None,
    device: Union[torch.device, str] = "cpu",
) -> torch.Tensor:
    """Receive a tensor of ``shape`` and ``dtype`` from the peer on ``axis`` (``offset=`` or ``rank=``)."""
    return irecv(shape, dtype, axis, offset=offset, rank=rank, device=device).wait()
