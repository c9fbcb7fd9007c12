"""Moving a value to another mesh over the same ranks (docs/spec.md#meshes-over-the-same-ranks).

A model may run its layers on different decompositions of one set of ranks:
dense layers on ``(dp, cp, tp)``, experts on ``(dp, ep)`` with ``ep`` the
flattening of ``(cp, tp)``.  ``reinterpret_mesh(x, {(cp, tp): ep})`` names
the regrouping: each group of source axes and the destination axes whose
flattening (first axis outermost) is the same ranks in the same order.  It
moves no data and keeps every local tensor.

The type rule follows from flattening (docs/spec.md#transitions): a type
uniform over a group of axes is that type on the flattened axis, so on the
destination axes.  R, I, V and P (with its reduction) carry over as they
are; a shard carries over with its dim, the group's axes replaced by the
destination axes in its major order where they are a consecutive run of the
axes sharding that dim, else it is a V.  A group whose axes hold different
types is refused: no one type stands for it.  The backward is the reverse
regrouping of the gradient, whose type is the per-axis dual of the result's,
so of the input's: nothing to check there.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from spmd_stubs.core.axis_types import AxisType, Kind, Shard, TensorType, Varying
from spmd_stubs.core.errors import Code, SpmdTypeError

Group = tuple[str, ...]
Regrouping = tuple[tuple[Group, Group], ...]
"""``((source axes, destination axes), ...)``, each side a group flattened first axis outermost."""


def written(group: Group) -> str:
    """A group as the user writes it: ``tp`` or ``(cp, tp)``."""
    return group[0] if len(group) == 1 else f"({', '.join(group)})"


def check_regrouping(groups: Regrouping) -> None:
    """Every axis on at most one side of one group, no side empty (``spmd-mesh``, malformed)."""
    seen: dict[str, str] = {}
    for source, destination in groups:
        if not source or not destination:
            raise _malformed("a group maps no axes", "name at least one axis on each side, {(cp, tp): ep}")
        for axis in (*source, *destination):
            if axis in seen:
                raise _malformed(f"axis {axis} is named twice ({seen[axis]} and {written(source)}: "
                                 f"{written(destination)})", "name each mesh axis once in the regrouping")
            seen[axis] = f"{written(source)}: {written(destination)}"


def regroup(x: TensorType, groups: Regrouping) -> TensorType:
    """``x``'s type after ``reinterpret_mesh(x, groups)``: each group's type on its destination axes.

    Axes no group names pass through.  A group of which ``x`` does not know
    every axis leaves its destination axes unknown.  A destination axis ``x`` already has, outside the
    groups, is refused: the value would be on both meshes at once.

    >>> str(regroup(TensorType.parse("V@cp, V@tp, R@dp"), ((("cp", "tp"), ("ep",)),)))
    'R@dp, V@ep'
    >>> str(regroup(TensorType.parse("S(0)@(cp,tp)"), ((("cp", "tp"), ("ep",)),)))
    'S(0)@ep'
    >>> regroup(TensorType.parse("R@cp, V@tp"), ((("cp", "tp"), ("ep",)),))
    Traceback (most recent call last):
    ...
    spmd_stubs.core.errors.SpmdTypeError: reinterpret_mesh moves (cp, tp) to ep, but x is R@cp, V@tp there: one type on ep cannot stand for both. Fix (needs your choice): give every axis of (cp, tp) one type first (all_gather(x, tp, src=V, dst=R), or convert on cp).
    """
    check_regrouping(groups)
    types = x.as_dict()
    moved = {axis for source, _ in groups for axis in source}
    result = {axis: t for axis, t in types.items() if axis not in moved}
    for source, destination in groups:
        for axis in destination:
            if axis in result:
                raise SpmdTypeError(
                    Code.MESH, axis,
                    f"reinterpret_mesh moves {written(source)} to {written(destination)}, but x already has "
                    f"{result[axis].on(axis)}: it would be on both meshes at once. Fix: name {axis} among the "
                    f"source axes too, or leave it out of the destination.")
        if any(axis not in types for axis in source):
            continue
        result.update(_group_type(x, source, destination))
    return TensorType.of(_renumbered(result))


def _group_type(x: TensorType, source: Group, destination: Group) -> dict[str, AxisType]:
    """The destination axes' types, from the group's uniform type on ``x``."""
    types = [x.as_dict()[axis] for axis in source]
    locals_ = {t.local for t in types}
    if len(locals_) != 1:
        shown = ", ".join(t.on(axis) for axis, t in zip(source, types))
        raise SpmdTypeError(
            Code.MESH, source[-1],
            f"reinterpret_mesh moves {written(source)} to {written(destination)}, but x is {shown} there: one "
            f"type on {written(destination)} cannot stand for both. Fix: give every axis of {written(source)} one "
            f"type first ({_uniform_hint(source, types)}).")
    (uniform,) = locals_
    if uniform.kind is not Kind.V or types[0].shard is None or len({t.shard for t in types}) != 1:
        return {axis: uniform for axis in destination}
    dim = types[0].shard
    assert dim is not None
    sharding = x.shard_axes(dim)
    start = sharding.index(source[0]) if source[0] in sharding else -1
    if sharding[start:start + len(source)] != source or (len(source) > 1 and None in (t.order for t in types)):
        return {axis: Varying for axis in destination}
    if len(destination) == 1 and len(sharding) == len(source):
        return {destination[0]: Shard(dim)}
    return {axis: Shard(dim, start + index) for index, axis in enumerate(destination)}


def _renumbered(types: dict[str, AxisType]) -> dict[str, AxisType]:
    """Shard orders made consecutive again per dim (a group of several axes may have become one)."""
    by_dim: dict[int, list[tuple[int, str]]] = {}
    for axis, t in types.items():
        if t.shard is not None and t.order is not None:
            by_dim.setdefault(t.shard, []).append((t.order, axis))
    for dim, ordered in by_dim.items():
        ordered.sort()
        for order, (_, axis) in enumerate(ordered):
            types[axis] = Shard(dim, order if len(ordered) > 1 else None)
    return types


def _uniform_hint(source: Group, types: Sequence[AxisType]) -> str:
    varying = [axis for axis, t in zip(source, types) if t.kind is Kind.V]
    others = [axis for axis, t in zip(source, types) if t.kind is not Kind.V]
    if varying and others:
        return f"all_gather(x, {varying[-1]}, src=V, dst=R), or convert on {', '.join(others)}"
    return f"convert or all_reduce on {', '.join(source[1:])}"


def check_declared_move(x: TensorType, declared: Mapping[str, AxisType]) -> None:
    """spmd_types' ``reinterpret_mesh(x, {axis: T, ...})``, its grouping left to the meshes' layouts.

    What holds under any grouping: an axis on both sides keeps its type, and
    where x has one type on every axis it leaves, each new axis (flattened
    from some of them) has that type too.
    """
    for axis, t in declared.items():
        had = x.get(axis)
        if had is not None and had.local != t.local:
            raise SpmdTypeError(
                Code.MESH, axis,
                f"reinterpret_mesh keeps axis {axis}, but changes its type from {had.on(axis)} to {t.on(axis)}. "
                f"Fix: declare {had.on(axis)} there, or change it with a collective first.")
    leaving = {axis: t for axis, t in x.axes if axis not in declared}
    arriving = {axis: t for axis, t in declared.items() if x.get(axis) is None}
    kinds = {t.local for t in leaving.values()}
    if len(kinds) != 1:
        return
    (uniform,) = kinds
    for axis, t in arriving.items():
        if t.local != uniform:
            shown = ", ".join(t.on(a) for a, t in leaving.items())
            raise SpmdTypeError(
                Code.MESH, axis,
                f"reinterpret_mesh moves {shown} to {axis}, but declares {t.on(axis)}: axes flattened from "
                f"{uniform} ones are {uniform} too. Fix: declare {uniform.on(axis)}.")


class RegroupingError(SpmdTypeError):
    """A regrouping written wrong: its fix is to write it right."""

    malformed = True


def _malformed(what: str, fix: str) -> SpmdTypeError:
    return RegroupingError(Code.MESH, "", f"reinterpret_mesh: {what}. Fix: {fix}.")


def check_one_mesh(declared: TensorType, actual: TensorType, meshes: Mapping[str, Sequence[str]], what: str) -> None:
    """A value of one mesh passed where another's is declared, without ``reinterpret_mesh`` (``spmd-mesh``).

    ``meshes`` are the declared meshes (name -> axes, outermost first).  The
    two types are on different meshes where some mesh holds each of them and
    none holds both.  The fix moves the axes only the value's mesh has to
    those only the declared one has; the ranks of the two groups must be the
    same (checked at run time by ``reinterpret_mesh``).
    """
    theirs = _mesh_holding(actual, meshes)
    ours = _mesh_holding(declared, meshes)
    if theirs is None or ours is None or _mesh_holding(_both(declared, actual), meshes) is not None:
        return
    source = tuple(axis for axis in meshes[theirs] if actual.get(axis) is not None and axis not in meshes[ours])
    destination = tuple(axis for axis in meshes[ours] if declared.get(axis) is not None and axis not in meshes[theirs])
    if not source or not destination:
        return
    raise SpmdTypeError(
        Code.MESH, destination[0],
        f"{what} is on mesh {theirs} ({actual}) but is declared on mesh {ours} ({declared}): "
        f"{', '.join(source)} and {', '.join(destination)} are axes of different meshes. Fix: move it with "
        f"reinterpret_mesh(x, {{{written(source)}: {written(destination)}}}) where the ranks of "
        f"{written(source)} are those of {written(destination)}.")


def _mesh_holding(x: TensorType, meshes: Mapping[str, Sequence[str]]) -> str | None:
    axes = {axis for axis, _ in x.axes}
    return next((name for name, held in meshes.items() if axes <= set(held)), None) if axes else None


def _both(declared: TensorType, actual: TensorType) -> TensorType:
    return TensorType.of({**actual.as_dict(), **declared.as_dict()})
