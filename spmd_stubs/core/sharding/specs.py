"""Partition specs on one axis: effective shard orders, comparisons, and how a spec is shown.

A shard's ``order`` counts its place among the axes splitting its dim
(docs/spec.md#global-spmd); on one global axis only the *global* axes count.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from spmd_stubs.core.axis_types import AxisType, Operand, Scalar, Shard, TensorType
from spmd_stubs.core.errors import Code, SpmdTypeError


def effective(tensor_type: TensorType, axis: str, global_axes: Iterable[str]) -> AxisType | None:
    """``tensor_type`` on ``axis``, its shard order counted among the *global* axes only.

    With ``dp`` local, ``S(0)@(dp,tp)`` is, on ``tp``, just ``S(0)``: each
    dp-rank's tensor is split by tp alone.
    """
    axis_type = tensor_type.get(axis)
    if axis_type is None or axis_type.shard is None or axis_type.order is None:
        return axis_type
    chosen = set(global_axes) | {axis}
    same = sorted(
        (t.order, name)
        for name, t in tensor_type.axes
        if name in chosen and t.shard == axis_type.shard and t.order is not None
    )
    if len(same) < 2:
        return Shard(axis_type.shard)
    return Shard(axis_type.shard, [name for _, name in same].index(axis))


def normalise_orders(mapping: Mapping[str, AxisType]) -> dict[str, AxisType]:
    """Renumber shard orders per dim among the axes that still shard it (None when alone)."""
    by_dim: dict[int, list[tuple[int, str]]] = {}
    for name, t in mapping.items():
        if t.shard is not None and t.order is not None:
            by_dim.setdefault(t.shard, []).append((t.order, name))
    result = dict(mapping)
    for dim, entries in by_dim.items():
        alone = sum(1 for t in mapping.values() if t.shard == dim) < 2
        for position, (_, name) in enumerate(sorted(entries)):
            result[name] = Shard(dim, None if alone else position)
    return result


def same_spec(a: AxisType, b: AxisType) -> bool:
    """Equal as global types: the same kind, shard dim, order and reduction."""
    return a == b


def spec_text(t: AxisType, axis: str) -> str:
    """``S(0)@tp``; a shard with an order shows it: ``S(0)@tp (order 1)``."""
    text = t.on(axis)
    return f"{text} (order {t.order})" if t.order is not None else text


def shown(operands: Sequence[Operand], axis: str) -> str:
    """The operands as a message lists them: typed ones by spec, python numbers as ``scalar``."""
    parts = []
    for o in operands:
        if isinstance(o, AxisType):
            parts.append(spec_text(o, axis))
        elif isinstance(o, Scalar):
            parts.append("scalar")
    return ", ".join(parts)


def spec_mismatch(declared: AxisType, actual: AxisType, axis: str, where: str) -> SpmdTypeError | None:
    """A global boundary (a parameter, a return, a collective's src) given another split.

    V on either side is no partition spec: accepted (the boundary declares it).
    """
    if declared.shard is None or actual.shard is None or same_spec(declared, actual):
        return None
    if declared.shard == actual.shard:
        fix = f"redistribute(x, src=(...{spec_text(actual, axis)}...), dst=(...{spec_text(declared, axis)}...)) to reorder the axes"
    else:
        fix = f"all_to_all(x, {axis}, src={actual}, dst={declared})"
    return SpmdTypeError(
        Code.SHARD_MISMATCH,
        axis,
        f"{where} is declared {spec_text(declared, axis)} but gets {spec_text(actual, axis)} on global axis "
        f"{axis}: the pieces make up a different global tensor. Fix: {fix}.",
    )
