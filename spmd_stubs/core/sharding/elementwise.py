"""Ops whose sharded operands must all be split the same way: elementwise ops, ``cat`` and ``stack``.

Elementwise operands align from the right (broadcasting): an operand that is
not sharded on the axis (R, I, P) is assumed to broadcast along the sharded
dim, and one that is sharded to have the result's ndim (docs/spec.md#global-spmd).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from spmd_stubs.core.axis_types import AxisType, Kind, Operand
from spmd_stubs.core.errors import Code, SpmdTypeError
from spmd_stubs.core.sharding.errors import gather_fix, mismatch, needless_partial, raise_error
from spmd_stubs.core.sharding.readings import Build, DimMap, inserted, maps, ndims, norm_or_invalid, unary
from spmd_stubs.core.sharding.specs import shown


@dataclass(frozen=True)
class Pointwise:
    """Elementwise over every tensor operand, broadcasting (aligned from the right)."""

    def rule(self, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
        if partial is not None:
            raise needless_partial(op, axis, operands)
        sharded = [o for o in operands if isinstance(o, AxisType) and o.shard is not None]
        return one_split(sharded, operands, axis, op)


@dataclass(frozen=True)
class Concat:
    """``cat(tensors, dim)``: every operand must be split the same way, not on ``dim``."""

    dim: int

    def rule(self, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
        def build(n: int) -> list[DimMap]:
            k = norm_or_invalid(self.dim, n)
            return [DimMap(n, {i: i for i in range(n) if i != k}, touched=frozenset({k}))]

        return _join(self.dim, build, operands, axis, op, partial)


@dataclass(frozen=True)
class Stack:
    """``stack(tensors, dim)``: a new dim at ``dim``; operands split the same way."""

    dim: int

    def rule(self, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
        return _join(self.dim, inserted(self.dim), operands, axis, op, partial)


def one_split(sharded: Sequence[AxisType], operands: Sequence[Operand], axis: str, op: str) -> AxisType:
    """The split the sharded operands share; differently split operands are an error."""
    first = sharded[0]
    for other in sharded[1:]:
        if other == first:
            continue
        if other.shard == first.shard:
            raise mismatch(
                op,
                axis,
                operands,
                f"the operands split dim {first.shard} over the axes in a different order, so equal "
                f"local positions hold different global elements",
                "redistribute one operand to the other's partition spec, e.g. "
                f"redistribute(y, src=(S({first.shard})@(...),), dst=(S({first.shard})@(...),)) with the order of the other",
            )
        if (first.shard >= 0) != (other.shard >= 0):  # type: ignore[operator]
            raise SpmdTypeError(
                Code.SHARD_MISMATCH,
                axis,
                f"{op} on global axis {axis} ({shown(operands, axis)}): the operands are split on "
                f"S({first.shard}) and S({other.shard}), which are the same dim for some ndims and "
                f"not for others. Fix: write the shard dims consistently (both counted from the front, or "
                f"both from the back), or all_to_all(y, {axis}, src={other}, dst={first}) if they differ.",
            )
        raise mismatch(
            op,
            axis,
            operands,
            f"the operands are split on different dims (S({first.shard}) and S({other.shard})), so "
            f"each rank holds pieces of different global elements",
            f"all_to_all(y, {axis}, src={other}, dst={first}) on the S({other.shard}) operand",
        )
    return first


def _join(
    dim: int, build: Build, operands: Sequence[Operand], axis: str, op: str, partial: str | None
) -> AxisType:
    """``cat`` / ``stack`` along ``dim``: the operands' shared split, which must not be on ``dim``."""
    if partial is not None:
        raise needless_partial(op, axis, operands)
    first = one_split(_all_sharded(operands, axis, op), operands, axis, op)
    d = first.shard
    assert d is not None

    def touched() -> SpmdTypeError:
        return mismatch(
            op,
            axis,
            operands,
            f"it joins along the sharded dim {d}: each rank would put its own pieces side by side, "
            "not the global tensors",
            f"{gather_fix(axis, first)}; or join along another dim",
        )

    return unary([first], axis, op, maps(build), ndims(dim, d), f"dim={dim}", lambda: raise_error(touched()), touched)


def _all_sharded(operands: Sequence[Operand], axis: str, op: str) -> list[AxisType]:
    """The tensors joined, every one of them sharded: a whole one has another size on every rank."""
    tensors = [o for o in operands if isinstance(o, AxisType)]
    sharded = [o for o in tensors if o.shard is not None]
    if len(sharded) != len(tensors):
        whole = next(o for o in tensors if o.shard is None)
        raise mismatch(
            op,
            axis,
            operands,
            f"it joins pieces split on S({sharded[0].shard}) with a whole tensor ({whole.on(axis)}), "
            "whose sizes differ on every rank",
            f"convert(y, {axis}, src={whole}, dst={sharded[0]}) on the whole operand"
            if whole.kind in (Kind.R, Kind.I)
            else gather_fix(axis, sharded[0]),
        )
    return sharded
