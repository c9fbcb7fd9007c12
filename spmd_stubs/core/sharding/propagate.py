"""The entry point: an op's result on one global axis, from its shape behaviour (docs/spec.md#global-spmd)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Union

from spmd_stubs.core.axis_types import AxisType, Kind, Operand
from spmd_stubs.core.errors import Code, SpmdTypeError
from spmd_stubs.core.sharding.dims import Along, Flatten, Movedim, Permute, Reduce, Squeeze, Transpose, Unsqueeze, View
from spmd_stubs.core.sharding.einsum import Attention, Einsum, Linear, Matmul
from spmd_stubs.core.sharding.elementwise import Concat, Pointwise, Stack
from spmd_stubs.core.sharding.errors import first_shard, gather_fix, mismatch, needless_partial
from spmd_stubs.core.sharding.specs import shown


@dataclass(frozen=True)
class Opaque:
    """An op with no propagation rule: any sharded operand is rejected."""

    why: str = "has no shard propagation rule"

    def rule(self, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
        raise mismatch(op, axis, operands, f"{op} {self.why} in global SPMD", gather_fix(axis, first_shard(operands)))


Behaviour = Union[
    Pointwise, Einsum, Matmul, Linear, Attention, Reduce, Along, Transpose, Permute, Movedim, Concat, Stack,
    Unsqueeze, Squeeze, Flatten, View, Opaque,
]
"""How an op treats tensor dims, with the dims of the call filled in.

Each behaviour's ``rule(operands, axis, op, partial)`` gives the result's
spec on the axis where some operand is sharded there.
"""


def propagate(
    behaviour: Behaviour,
    operands: Sequence[Operand],
    axis: str,
    op: str,
    local: AxisType | None,
    partial: str | None = None,
) -> AxisType | None:
    """The global type on ``axis`` of ``op``'s result; raises :class:`SpmdTypeError`.

    ``operands`` are the op's operands on ``axis`` in the order its behaviour
    names them (data first; einsum's and cat's tensors in order), with
    :func:`~spmd_stubs.core.sharding.effective` orders.  ``local`` is the
    local rules' result on the axis.  ``partial`` is the reduction
    ``out_partial_axes`` asks for on this axis (``"sum"``, ``"max"``,
    ``"min"``), None when the call does not name it.
    """
    for operand in operands:
        if isinstance(operand, AxisType) and operand.kind is Kind.V and operand.shard is None:
            raise SpmdTypeError(
                Code.SHARD_MISMATCH,
                axis,
                f"{op} gets a V@{axis} operand ({shown(operands, axis)}) on global axis {axis}: a "
                f"varying tensor without a partition spec has no global meaning. Fix: annotate how "
                f"its pieces make up the global tensor (S(i)@{axis}), or run this code in a "
                f"@local_map({axis}) def.",
            )
    if not any(isinstance(o, AxisType) and o.shard is not None for o in operands):
        if partial is not None:
            raise needless_partial(op, axis, operands)
        return local
    result = behaviour.rule(operands, axis, op, partial)
    if result.kind is Kind.P and partial is None:  # pragma: no cover -- rules raise first
        raise AssertionError("a partial result without out_partial_axes")
    return result
