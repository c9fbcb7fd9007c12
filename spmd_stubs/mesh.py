"""Binding mesh axes to process groups at runtime.

A mesh axis (``tp``, ``dp``, a ``MeshAxis`` subclass) is only a name to the
type checker; a collective needs the process group behind it.  Two ways to
provide it, combinable, each replacing earlier bindings of the same axes:

* :func:`bind_mesh` binds every named dim of a ``DeviceMesh``
  (``init_device_mesh(..., mesh_dim_names=("dp", "tp"))`` binds ``dp``, ``tp``);
* :func:`bind_groups` binds axes to explicit ``ProcessGroup`` s, the way
  Megatron-style code keeps its own groups.  A key may also be a tuple of
  axes, binding a ready-made flattened group.

A tuple of axes, ``(dp, cp)``, names one flattened axis: one collective over
the product group, the first axis outermost, so the flattened index of a rank
is ``index_on_dp * size_of_cp + index_on_cp``.  :func:`group_of` builds that
group on first use (``DeviceMesh`` flattening when all the axes come from one
mesh, otherwise a new group over the product of the bound groups) and caches
it.  Every rank of the flattened group must reach that first use together,
as it must for the collective itself.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping, Union

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup
from torch.distributed.device_mesh import DeviceMesh

from spmd_stubs.core.axis_types import distinct_axes
from spmd_stubs.types import MeshAxis, axis_name

__all__ = ["bind_mesh", "bind_groups", "group_of", "unbind", "axes_label", "UnboundAxisError"]

AxisLike = Union[type[MeshAxis], tuple[type[MeshAxis], ...]]

_bound: dict[str, Union[DeviceMesh, ProcessGroup]] = {}
"""axis name -> the mesh it is a dim of, or its process group."""

_groups: dict[tuple[str, ...], ProcessGroup] = {}
"""axis names (outer first) -> resolved group; explicit bindings and cache."""

_binding_caches: list[dict[Any, Any]] = []
"""Every dict :func:`binding_cache` made: emptied by every (un)binding."""


def binding_cache() -> dict[Any, Any]:
    """A new dict that every ``bind_mesh``/``bind_groups``/``unbind`` empties.

    For what is derived from the bound groups and looked up on every call
    (an axis's group, a call site's resolved collective).
    """
    cache: dict[Any, Any] = {}
    _binding_caches.append(cache)
    return cache


_resolved: dict[AxisLike, tuple[ProcessGroup, int]] = binding_cache()
"""axis or tuple of axes, as passed -> its group and size, skipping the name checks."""


class UnboundAxisError(LookupError):
    """A collective names a mesh axis that no process group is bound to."""


def _names(axes: AxisLike) -> tuple[str, ...]:
    """The axis names of one axis or a flattened tuple, each at most once (ValueError otherwise)."""
    if not isinstance(axes, tuple):
        return (axis_name(axes),)
    if not axes:
        raise ValueError("an empty tuple names no mesh axis; pass e.g. (dp, cp)")
    return distinct_axes(axis_name(a) for a in axes)


def axes_label(axes: AxisLike) -> str:
    """How an axis or a flattened tuple of axes is printed: ``tp``, ``(dp, cp)``."""
    if isinstance(axes, tuple):
        return "(" + ", ".join(axis_name(a) for a in axes) + ")"
    return axis_name(axes)


def _clear_binding_caches() -> None:
    for cache in _binding_caches:
        cache.clear()


def _forget(names: tuple[str, ...]) -> None:
    """Drop cached groups that involve any of ``names`` (they are rebound), and the per-call caches."""
    _clear_binding_caches()
    for key in [k for k in _groups if set(k) & set(names)]:
        del _groups[key]


def bind_mesh(mesh: DeviceMesh) -> None:
    """Bind every named dim of ``mesh`` to the mesh axis of the same name.

    ``bind_mesh(init_device_mesh("cuda", (2, 4), mesh_dim_names=("dp", "tp")))``
    makes ``tp`` mean ``mesh.get_group("tp")``.
    """
    names = mesh.mesh_dim_names
    if not names:
        raise ValueError(
            "bind_mesh needs a DeviceMesh with mesh_dim_names, e.g. "
            'init_device_mesh("cuda", (2, 4), mesh_dim_names=("dp", "tp"))'
        )
    _forget(tuple(names))
    for name in names:
        _bound[name] = mesh


def bind_groups(groups: Mapping[AxisLike, ProcessGroup]) -> None:
    """Bind axes (or tuples of axes: flattened groups) to explicit process groups.

    ``bind_groups({tp: tp_group, dp: dp_group})``, as a Megatron-style code
    base keeps them; ``bind_groups({(dp, cp): dp_cp_group})`` provides the
    flattened group instead of having :func:`group_of` build it.
    """
    for axes, group in groups.items():
        if not isinstance(group, ProcessGroup):
            raise TypeError(f"bind_groups: {axes_label(axes)} must map to a ProcessGroup, got {group!r}")
        names = _names(axes)
        _forget(names)
        if len(names) == 1:
            _bound[names[0]] = group
        _groups[names] = group


def unbind() -> None:
    """Forget every binding (tests, or re-initialising the process groups)."""
    _bound.clear()
    _groups.clear()
    _clear_binding_caches()


def group_of(axes: AxisLike) -> ProcessGroup:
    """The process group of ``axes``: one mesh axis, or a tuple flattened outer-first.

    Raises :class:`UnboundAxisError` naming the axis and how to bind it.
    """
    return _group(_names(axes))


def group_and_size(axes: AxisLike) -> tuple[ProcessGroup, int]:
    """:func:`group_of` ``axes`` and its world size, cached per ``axes`` object (eager calls)."""
    if torch.compiler.is_compiling():
        return _traced_group_and_size(axes)
    try:
        return _resolved[axes]
    except (KeyError, TypeError):  # TypeError: unhashable, group_of says what is wrong
        pass
    group = group_of(axes)
    _resolved[axes] = resolved = (group, dist.get_world_size(group))
    return resolved


def _traced_group_and_size(axes: AxisLike) -> tuple[ProcessGroup, int]:
    """:func:`group_and_size` under ``torch.compile``: the caches neither read nor filled.

    Dynamo guards on what traced code finds in a dict: an entry the trace
    added (or an eager call adds later) fails that guard and the next call
    recompiles.  One axis resolves from its binding alone, which only a
    rebinding changes; a flattened tuple's group is built once and kept in
    ``_groups``, as eagerly (building it per trace would make a new group).
    """
    names = _names(axes)
    group = _resolve(names) if len(names) == 1 else _group(names)
    return group, dist.get_world_size(group)


def _group(names: tuple[str, ...]) -> ProcessGroup:
    group = _groups.get(names)
    if group is None:
        group = _resolve(names)
        _groups[names] = group
    return group


def _resolve(names: tuple[str, ...]) -> ProcessGroup:
    sources = [_source(name) for name in names]
    first = sources[0]
    if isinstance(first, DeviceMesh) and all(s is first for s in sources):
        if len(names) == 1:
            return first.get_group(names[0])
        mesh_order = tuple(first.mesh_dim_names or ())  # never empty: bind_mesh binds named dims only
        dims = [mesh_order.index(name) for name in names]
        if dims == sorted(dims):
            return first[names]._flatten().get_group()
        # DeviceMesh slices only in mesh order; build the other orders from groups.
    if len(names) == 1:
        assert isinstance(first, ProcessGroup)
        return first
    return _flatten_groups(names)


def _source(name: str) -> Union[DeviceMesh, ProcessGroup]:
    source = _bound.get(name)
    if source is None:
        raise UnboundAxisError(
            f"mesh axis {name} is not bound to a process group. Fix: call "
            f"spmd_stubs.bind_mesh(mesh) with a DeviceMesh whose mesh_dim_names include "
            f"{name!r}, or spmd_stubs.bind_groups({{{name}: group}}), or pass group= "
            f"to the collective."
        )
    return source


def _flattened_ranks(names: tuple[str, ...]) -> list[int]:
    """Global ranks of this rank's flattened group, in flattened order.

    Dims of one bound ``DeviceMesh`` are read off its layout.  Otherwise each
    rank knows only its own groups, so the members of the outermost group
    exchange their inner flattened groups (recursively): member ``i`` of the
    outer group contributes the ranks ``i * inner_size ...``.
    """
    laid_out = _mesh_ranks(names)
    if laid_out is not None:
        return laid_out
    outer = _group(names[:1])
    if len(names) == 1:
        return dist.get_process_group_ranks(outer)
    inner = _flattened_ranks(names[1:])
    per_member: list[Any] = [None] * dist.get_world_size(outer)
    dist.all_gather_object(per_member, inner, group=outer)
    return [rank for member in per_member for rank in member]


def _mesh_ranks(names: tuple[str, ...]) -> Union[list[int], None]:
    """The flattened ranks of ``names`` where all are dims of one bound ``DeviceMesh``: this rank's
    coordinate on the others, the named dims walked first outermost; None otherwise."""
    sources = [_bound.get(name) for name in names]
    mesh = sources[0]
    if not isinstance(mesh, DeviceMesh) or any(source is not mesh for source in sources):
        return None
    coordinate = mesh.get_coordinate()
    if coordinate is None:
        return None
    order = list(mesh.mesh_dim_names or ())
    dims = [order.index(name) for name in names]
    layout = mesh.mesh.tolist()
    ranks = []
    for chosen in itertools.product(*(range(mesh.mesh.shape[dim]) for dim in dims)):
        index = list(coordinate)
        for dim, position in zip(dims, chosen):
            index[dim] = position
        entry: Any = layout
        for position in index:
            entry = entry[position]
        ranks.append(int(entry))
    return ranks


def _flatten_groups(names: tuple[str, ...]) -> ProcessGroup:
    ranks = _flattened_ranks(names)
    if len(set(ranks)) != len(ranks):
        raise ValueError(
            f"the groups bound to {', '.join(names)} overlap (flattened ranks {ranks}); "
            "flattened axes must be independent dims of one mesh"
        )
    # Only the members create it (they are the ones running this collective);
    # sort_ranks=False keeps the flattened order as the group rank order.
    group: ProcessGroup = dist.new_group(ranks, use_local_synchronization=True, sort_ranks=False)
    return group


def mesh_dim_order(names: tuple[str, ...]) -> Union[tuple[str, ...], None]:
    """The ``mesh_dim_names`` of the one ``DeviceMesh`` all of ``names`` are bound to, else None.

    A ``DeviceMesh`` flattens its dims only in this order, so a planner that
    flattens several axes into one collective keeps to it.
    """
    sources = [_bound.get(name) for name in names]
    first = sources[0] if sources else None
    if isinstance(first, DeviceMesh) and all(source is first for source in sources):
        return tuple(first.mesh_dim_names or ())
    return None
