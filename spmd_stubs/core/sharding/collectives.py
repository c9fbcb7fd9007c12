"""Collectives and casts on a global axis: shard propagation for comms (docs/spec.md#global-spmd)."""

from __future__ import annotations

from typing import Iterable

from spmd_stubs.core.axis_types import AxisType, Kind, Shard, TensorType
from spmd_stubs.core.errors import Code, SpmdTypeError
from spmd_stubs.core.sharding.specs import effective, normalise_orders


def global_collective(
    op: str,
    src: AxisType,
    dst: AxisType,
    mapping: dict[str, AxisType],
    axis: str,
    global_axes: Iterable[str],
) -> None:
    """A collective or cast on global ``axis``: check it and update ``mapping`` in place.

    Only the shard forms have propagation rules: ``src=V`` / ``dst=V`` add or
    remove a dim (stack/unbind), which a partition spec cannot say.  The
    input's split must be the ``src`` shard (dim and, among the global axes,
    the minor position: only the last axis splitting a dim can be gathered or
    moved), and a ``dst`` shard makes ``axis`` the minor axis of its dim.
    ``convert`` is the identity in global semantics.
    """
    chosen = set(global_axes) | {axis}
    call = f"{op}(x, {axis}, src={src}, dst={dst})"
    _check_shard_forms(call, src, dst, axis)
    if axis in mapping:
        _check_input(call, src, mapping, axis, chosen)
    mapping.pop(axis, None)
    _place(dst, mapping, axis)


def _check_shard_forms(call: str, src: AxisType, dst: AxisType, axis: str) -> None:
    for side, given in (("src", src), ("dst", dst)):
        if given.kind is Kind.V and given.shard is None:
            raise SpmdTypeError(
                Code.SHARD_MISMATCH,
                axis,
                f"{call} uses the varying form ({side}=V) on global axis {axis}: it has no shard propagation "
                f"rule, since it stacks or unbinds the ranks' pieces on a new dim. Fix: use the shard form "
                f"({side}=S(i), with the tensor dim the pieces are split on), or run it in a @local_map({axis}) def.",
            )


def _check_input(call: str, src: AxisType, mapping: dict[str, AxisType], axis: str, chosen: set[str]) -> None:
    """The input has a partition spec on the axis, split as ``src`` says, with the axis minor on its dim."""
    actual = effective(TensorType.of(mapping), axis, chosen)
    assert actual is not None
    if actual.kind is Kind.V and actual.shard is None:
        raise SpmdTypeError(
            Code.SHARD_MISMATCH,
            axis,
            f"{call} gets a V@{axis} input on global axis {axis}: a varying tensor without a partition spec "
            f"has no global meaning. Fix: annotate it S(i)@{axis}, or run this code in a @local_map({axis}) def.",
        )
    if actual.shard is not None and src.shard is not None and actual.shard != src.shard:
        written = Shard(actual.shard)
        raise SpmdTypeError(
            Code.SHARD_MISMATCH,
            axis,
            f"{call} on global axis {axis} is told src={src}, but the input is {written.on(axis)}, split on "
            f"dim {actual.shard}. Fix: pass src={written}, or first "
            f"all_to_all(x, {axis}, src={written}, dst={src}).",
        )
    if actual.shard is not None and actual.order is not None:
        _check_minor(call, actual.shard, actual.order, mapping, axis, chosen)


def _check_minor(call: str, dim: int, order: int, mapping: dict[str, AxisType], axis: str, chosen: set[str]) -> None:
    """Only the last (minor) axis splitting a dim holds contiguous pieces a per-axis collective can move."""
    group = [name for name, t in mapping.items() if name in chosen and t.shard == dim]
    if order != len(group) - 1:
        spec = TensorType.of({name: mapping[name] for name in group})
        raise SpmdTypeError(
            Code.SHARD_MISMATCH,
            axis,
            f"{call} on global axis {axis}: the input is {spec}, where {axis} is not the last (minor) axis "
            f"splitting dim {dim}, so its pieces are not contiguous and a per-axis collective "
            f"cannot move them. Fix: spmd.redistribute(x, src=({spec},), dst=(...)) with the whole "
            f"partition spec, which plans the steps.",
        )


def _place(dst: AxisType, mapping: dict[str, AxisType], axis: str) -> None:
    """The result on the axis: ``dst``; a shard becomes the minor axis of its dim."""
    if dst.shard is None:
        mapping[axis] = dst
        mapping.update(normalise_orders(mapping))
        return
    ranked: list[tuple[int, str]] = sorted(
        (t.order if t.order is not None else -1, name) for name, t in mapping.items() if t.shard == dst.shard
    )
    if not ranked:
        mapping[axis] = Shard(dst.shard)
        return
    for position, (_, name) in enumerate(ranked):
        mapping[name] = Shard(dst.shard, position)
    mapping[axis] = Shard(dst.shard, len(ranked))
