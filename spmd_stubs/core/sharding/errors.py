"""The errors shard propagation raises, and the fixes they name (docs/spec.md#global-spmd)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn, Sequence

from spmd_stubs.core.axis_types import AxisType, Operand, PartialOf
from spmd_stubs.core.errors import Code, SpmdTypeError
from spmd_stubs.core.sharding.specs import shown


@dataclass(frozen=True)
class SpmdForm:
    """The ``spmd.*`` op that does an op's contraction with ``out_partial_axes``: what its fixes name.

    ``SpmdForm("matmul")`` is ``spmd.matmul(..., out_partial_axes=tp)``;
    ``args`` and ``then`` spell a form that needs more than the call
    (``mean``: ``spmd.sum(x, dim, ...)``, then divided by the global size).
    """

    op: str
    args: str = "..."
    then: str = ""

    def call(self, axis: str) -> str:
        return f"spmd.{self.op}({self.args}, out_partial_axes={axis}){self.then}"


EINSUM_FORM = SpmdForm("einsum")
"""How a contraction without a ``spmd.*`` form of its own is written with ``out_partial_axes``."""


def mismatch(op: str, axis: str, operands: Sequence[Operand], why: str, fix: str) -> SpmdTypeError:
    return SpmdTypeError(
        Code.SHARD_MISMATCH,
        axis,
        f"{op} on global axis {axis} ({shown(operands, axis)}): {why}. Fix: {fix}.",
    )


def gather_fix(axis: str, shard: AxisType, tensor: str = "x") -> str:
    return f"all_gather({tensor}, {axis}, src={shard}, dst=R) first, or run it in a @local_map({axis}) def"


def first_shard(operands: Sequence[Operand]) -> AxisType:
    return next(o for o in operands if isinstance(o, AxisType) and o.shard is not None)


def raise_error(error: SpmdTypeError) -> NoReturn:
    """``raise`` as an expression, for the callbacks that answer a reading with an error."""
    raise error


class Loud(Exception):
    """This reading fails torch's shape check at runtime: drop it."""

    def __init__(self, error: SpmdTypeError) -> None:
        super().__init__(error.message)
        self.error = error


def needless_partial(op: str, axis: str, operands: Sequence[Operand]) -> SpmdTypeError:
    return SpmdTypeError(
        Code.SHARDED_CONTRACTION,
        axis,
        f"{op} names {axis} in out_partial_axes, but no dim it contracts or reduces is sharded on global "
        f"axis {axis} ({shown(operands, axis)}): the result is already the global value on every rank. "
        f"Fix: drop {axis} from out_partial_axes.",
    )


def contraction(
    op: str,
    axis: str,
    operands: Sequence[Operand],
    partial: str | None,
    what: str,
    allowed: str | None,
    spmd: SpmdForm | None,
) -> AxisType:
    """A sharded dim contracted or reduced: P[partial] when asked for, else the error.

    ``allowed`` is the pending reduction the op can leave (None: it cannot),
    ``spmd`` the ``spmd.*`` form the fix names.
    """
    if partial is not None and allowed is not None:
        if partial != allowed:
            raise SpmdTypeError(
                Code.SHARDED_CONTRACTION,
                axis,
                f"{op} over a dim sharded on global axis {axis} ({shown(operands, axis)}) leaves a pending "
                f"{allowed}, not a pending {partial}. Fix: use the op whose reduction is a {partial} "
                f"(spmd.sum for P, spmd.amax for Pmax, spmd.amin for Pmin).",
            )
        return PartialOf(allowed)
    fix = _reduce_fixes(axis, operands, spmd) if allowed is None else _partial_fix(axis, operands, allowed, spmd)
    raise SpmdTypeError(
        Code.SHARDED_CONTRACTION,
        axis,
        f"{op} {what} a dim sharded on global axis {axis} ({shown(operands, axis)}): each rank "
        f"computes only its part of the result, which global SPMD never turns into a Partial implicitly. "
        f"Fix: {fix}.",
    )


def _partial_fix(axis: str, operands: Sequence[Operand], allowed: str, spmd: SpmdForm | None) -> str:
    """Name the axis in ``out_partial_axes`` and reduce the pending ``allowed`` later."""
    suffix = "" if allowed == "sum" else allowed
    return (
        f"name the axis, {(spmd or EINSUM_FORM).call(axis)}, to get the pending {allowed} P{suffix}@{axis} "
        f"and reduce it later (all_reduce(y, {axis}, src=P{suffix}, dst=R)); or "
        f"{gather_fix(axis, first_shard(operands))}"
    )


def _reduce_fixes(axis: str, operands: Sequence[Operand], spmd: SpmdForm | None) -> str:
    """An op that cannot leave a pending reduction: its ``spmd.*`` form, if it has one, or a gather."""
    gather = gather_fix(axis, first_shard(operands))
    return gather if spmd is None else f"{spmd.call(axis)}, or {gather}"
