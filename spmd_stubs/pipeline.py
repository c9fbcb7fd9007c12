"""Pipeline stages: what crosses between neighbouring stages, declared once (docs/spec.md#pipeline-stages).

A stage's activation goes to the next stage and its gradient comes back.
Every stage runs the same program on its own rank of the pipeline axis, so
what one stage sends is what the next receives: declare it once, as the
type of a :class:`Boundary`, and send and receive through it::

    Activation = Tensor[V[pp], S[0, dp], I[tp]]         # an alias: the canonical form
    ACTIVATION: Boundary[Activation] = Boundary(pp)

    ACTIVATION.send(h)                                  # h must have that type
    x = ACTIVATION.recv(shape, torch.float32)           # x has it
    ACTIVATION.gradient().send(x.grad)                  # the dual type, back

``send`` takes a value of the declared type (the checker compares it, as
for any argument) and ``recv`` gives one, so a stage that sends what its
neighbour does not expect is an error where it sends.  ``gradient()`` is
the boundary the gradient crosses back on: its type is the declared one's
dual on every axis (``R`` <-> ``P``, ``I``, ``V`` and ``S(i)`` themselves),
typed by the checker.  The transfers are :mod:`spmd_stubs.p2p`'s, forward
to the next stage (``offset=1``) and backward to the previous one.
"""

from __future__ import annotations

from typing import Generic, TypeVar, Union

import torch

from spmd_stubs import p2p
from spmd_stubs.mesh import AxisLike
from spmd_stubs.pending import Pending

__all__ = ["Boundary"]

T = TypeVar("T", bound=torch.Tensor)


class Boundary(Generic[T]):
    """The values of type ``T`` that cross between neighbouring stages on ``axis``, forward (``direction=1``:
    to the next stage) or, for :meth:`gradient`, backward."""

    def __init__(self, axis: AxisLike, direction: int = 1) -> None:
        self.axis, self.direction = axis, direction

    def send(self, x: T) -> None:
        """Send ``x`` to the stage this boundary leads to, and wait until it is sent."""
        p2p.send(x, self.axis, offset=self.direction)

    def recv(self, shape: p2p.Shape, dtype: torch.dtype, device: Union[torch.device, str] = "cpu") -> T:
        """Receive the value of ``shape`` and ``dtype`` the stage before (along this boundary) sends."""
        return p2p.recv(shape, dtype, self.axis, offset=-self.direction, device=device)  # type: ignore[return-value]

    def isend(self, x: T) -> Pending[None]:
        """:meth:`send`, started; ``wait()`` once sent."""
        return p2p.isend(x, self.axis, offset=self.direction)

    def irecv(self, shape: p2p.Shape, dtype: torch.dtype, device: Union[torch.device, str] = "cpu") -> Pending[T]:
        """:meth:`recv`, started; ``wait()`` gives the value."""
        return p2p.irecv(shape, dtype, self.axis, offset=-self.direction, device=device)  # type: ignore[return-value]

    def gradient(self) -> Boundary[T]:
        """The boundary the gradients of these values cross back on; the checker types it with the dual of ``T``."""
        return Boundary(self.axis, -self.direction)
