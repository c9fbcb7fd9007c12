"""The machinery behind :mod:`spmd_stubs.dtensor`: one mesh dim's placement <-> its SPMD type.

:mod:`spmd_stubs.dtensor` states the correspondence (its module docstring
has the table) and holds the public functions; this module reads and writes
the placements of single mesh dims, decodes and encodes the order of nested
shards (``_StridedShard``), and compares placements.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.placement_types import Partial, Placement, Replicate, Shard, _StridedShard

from spmd_stubs import core
from spmd_stubs.core import AxisType, Kind, TensorType
from spmd_stubs.types import AxisAnnotation, MeshAxis, axis_name, tensor_type_of, to_axis_type

ReplicateChoice = Union[Any, Mapping[Union[str, type[MeshAxis]], Any]]
"""``R`` or ``I`` for every ``Replicate()`` dim, or a mapping axis -> ``R``/``I``."""

TypeLike = Union[TensorType, Iterable[AxisAnnotation]]
"""A :class:`~spmd_stubs.core.TensorType`, or ``TYPE@axis`` entries such as ``(R@tp, S(0)@dp)``."""

SHARDS = (Shard, _StridedShard)
"""Shard-like placements (``_StridedShard`` is not a ``Shard`` subclass)."""

_NO_INVERSE = "a bitwise reduction has no inverse that partitions a replicated value exactly"
_UNSUPPORTED_REDUCTIONS = {
    "product": "partitioning a replicated value into a pending product needs an n-th root, "
    "which is inexact and undefined for negative values",
    "band": _NO_INVERSE,
    "bor": _NO_INVERSE,
    "bxor": _NO_INVERSE,
}


# --------------------------------------------------------------------------
# The mesh
# --------------------------------------------------------------------------


def dim_names(mesh: DeviceMesh) -> tuple[str, ...]:
    """``mesh``'s dim names: the mesh axes SPMD types name (ValueError where it has none)."""
    names = mesh.mesh_dim_names
    if not names:
        raise ValueError(
            "SPMD types name mesh axes, so the DeviceMesh needs mesh_dim_names, e.g. "
            'init_device_mesh("cuda", (2, 4), mesh_dim_names=("dp", "tp"))'
        )
    return tuple(names)


def checked_length(placements: Sequence[Placement], mesh: DeviceMesh) -> None:
    if len(placements) != mesh.ndim:
        raise ValueError(
            f"{len(placements)} placements for a {mesh.ndim}-dim mesh {dim_names(mesh)}: "
            "a DTensor has exactly one placement per mesh dim"
        )


# --------------------------------------------------------------------------
# One placement -> its type
# --------------------------------------------------------------------------


def replicate_type(name: str, choice: Optional[ReplicateChoice], grad: Optional[Placement]) -> AxisType:
    """R or I for a ``Replicate()`` on mesh dim ``name``: from ``replicate=`` and/or the gradient's placement."""
    chosen, from_grad = _chosen(name, choice), _from_grad(name, grad)
    if chosen is not None and from_grad is not None and chosen != from_grad:
        raise ValueError(
            f"mesh dim {name}: replicate= says {chosen.on(name)} but the gradient placement "
            f"{grad!r} says {from_grad.on(name)}"
        )
    result = chosen or from_grad
    if result is None:
        raise ValueError(
            f"mesh dim {name} is Replicate(), which is R@{name} or I@{name} depending on its "
            f"gradient, and DTensor's placement does not say which. Pass replicate=R (the "
            f"gradient is summed over {name}: DTensor grad_placements Partial()) or replicate=I "
            f"(one logical use: grad_placements Replicate()), or grad_placements=."
        )
    return result


def _from_grad(name: str, grad: Optional[Placement]) -> Optional[AxisType]:
    """R or I as the gradient's placement says (``Partial()``: R, ``Replicate()``: I); None: not given."""
    if grad is None:
        return None
    if isinstance(grad, Replicate):
        return core.Invariant
    if type(grad) is Partial and grad.reduce_op == "sum":
        return core.Replicate
    raise ValueError(
        f"mesh dim {name} is Replicate() with gradient placement {grad!r}: a replicated "
        "value's gradient is Partial() (R: each rank's use adds a term) or Replicate() "
        "(I: one logical use)"
    )


def _chosen(name: str, choice: Optional[ReplicateChoice]) -> Optional[AxisType]:
    if choice is None:
        return None
    if isinstance(choice, Mapping):
        picked = None
        for key, value in choice.items():
            if (key if isinstance(key, str) else axis_name(key)) == name:
                picked = value
        if picked is None:
            return None
        choice = picked
    axis_type = to_axis_type(choice)
    if axis_type.kind not in (Kind.R, Kind.I):
        raise ValueError(f"replicate= takes R or I (the SPMD types of Replicate()), got {axis_type}")
    return axis_type


def partial_type(name: str, placement: Partial) -> AxisType:
    """The pending reduction a ``Partial`` placement on mesh dim ``name`` is (docs/spec.md#pending-reductions)."""
    if type(placement) is not Partial:
        raise ValueError(
            f"{type(placement).__name__} on mesh dim {name} has no SPMD type: its local tensors "
            "are not plain parts of a pending reduction (DTensor applies its own fix-up when it "
            "reduces them); redistribute the DTensor to Replicate() or Partial() first"
        )
    op = placement.reduce_op
    if op in core.REDUCE_OPS:
        return core.PartialOf(op)
    why = _UNSUPPORTED_REDUCTIONS.get(op, "it is not one of DTensor's reductions")
    raise ValueError(
        f"Partial({op!r}) on mesh dim {name} has no SPMD type: a pending reduction is a type only "
        f"if a replicated value can be partitioned into it exactly (sum, avg, max, min), and {why}. "
        f"Redistribute the DTensor to Replicate() on {name} first."
    )


# --------------------------------------------------------------------------
# The order of nested shards: _StridedShard
# --------------------------------------------------------------------------


def shard_orders(placements: tuple[Placement, ...], mesh: DeviceMesh) -> list[Optional[int]]:
    """Each mesh dim's order (0 major) among the mesh dims sharding its tensor dim.

    None where a tensor dim is sharded by one mesh dim only.  Decoded as
    DTensor decodes ``_StridedShard``: walking the mesh dims last to first, a
    mesh dim's split factor is the product of the sizes of the later mesh dims
    placed before it (more major) in the order built so far.
    """
    by_dim: dict[int, list[int]] = {}
    for index, placement in enumerate(placements):
        if isinstance(placement, SHARDS):
            by_dim.setdefault(placement.dim, []).append(index)
    orders: list[Optional[int]] = [None] * len(placements)
    for dim, mesh_dims in by_dim.items():
        # Decoded for one mesh dim too: that checks its split factor (which must be 1).
        major_first = _major_first(dim, mesh_dims, placements, mesh)
        if len(mesh_dims) > 1:
            for order, index in enumerate(major_first):
                orders[index] = order
    return orders


def _major_first(dim: int, mesh_dims: list[int], placements: tuple[Placement, ...], mesh: DeviceMesh) -> list[int]:
    """The mesh dims sharding tensor dim ``dim``, major first, as their split factors order them."""
    major_first: list[int] = []
    for index in reversed(mesh_dims):
        factor = _split_factor(placements[index])
        position = _prefix_with_product(major_first, factor, mesh)
        if position is None:
            names = dim_names(mesh)
            raise ValueError(
                f"{placements[index]!r} on mesh dim {names[index]} has split factor {factor}, "
                f"which no order of the later mesh dims sharding dim {dim} "
                f"({', '.join(names[i] for i in major_first) or 'none'}) gives: it is not a "
                "layout that nested shards of the dim describe"
            )
        major_first.insert(position, index)
    return major_first


def _split_factor(placement: Placement) -> int:
    return int(placement.split_factor) if isinstance(placement, _StridedShard) else 1


def _prefix_with_product(major_first: list[int], factor: int, mesh: DeviceMesh) -> Optional[int]:
    """The first position whose prefix's mesh sizes multiply to ``factor`` (None: none does)."""
    product = 1
    for position in range(len(major_first) + 1):
        if product == factor:
            return position
        if position < len(major_first):
            product *= mesh.size(major_first[position])
    return None


def nested_shard(dim: int, major_first: Sequence[int], index: int, mesh: DeviceMesh) -> Placement:
    """The placement of mesh dim ``index``, one of the mesh dims ``major_first`` sharding tensor dim ``dim``.

    The encoding :func:`shard_orders` decodes: the split factor is the
    product of the sizes of the more major mesh dims that come later in mesh
    order; 1 (mesh order) is a plain ``Shard``.
    """
    more_major = major_first[: list(major_first).index(index)]
    factor = math.prod(mesh.size(earlier) for earlier in more_major if earlier > index)
    return Shard(dim) if factor == 1 else _StridedShard(dim, split_factor=factor)


def ordered_placements(dt: DTensor) -> tuple[Placement, ...]:
    """``dt``'s placements, a non-default ``shard_order`` of its spec spelled with ``_StridedShard``.

    DTensor may keep the order of the mesh dims sharding one tensor dim in its
    spec (``shard_order``, major first) instead of in ``_StridedShard``
    placements; both describe the same layout.
    """
    placements = tuple(dt.placements)
    shard_order = getattr(dt._spec, "shard_order", None)
    if not shard_order:
        return placements
    out = list(placements)
    for entry in shard_order:
        for index in entry.mesh_dims:
            out[index] = nested_shard(entry.tensor_dim, entry.mesh_dims, index, dt.device_mesh)
    return tuple(out)


# --------------------------------------------------------------------------
# Types -> placements
# --------------------------------------------------------------------------


def as_tensor_type(value: TypeLike) -> TensorType:
    if isinstance(value, TensorType):
        return value
    return tensor_type_of(value)


def types_per_dim(tensor_type: TensorType, mesh: DeviceMesh) -> list[tuple[str, AxisType]]:
    """The type on every mesh dim, in mesh order; every mesh dim and only those."""
    names = dim_names(mesh)
    given = tensor_type.as_dict()
    unknown = [axis for axis in given if axis not in names]
    if unknown:
        raise ValueError(
            f"the type {tensor_type} names {', '.join(unknown)}, which the mesh {names} does not have"
        )
    missing = [name for name in names if name not in given]
    if missing:
        raise ValueError(
            f"the type {tensor_type} says nothing about mesh dim(s) {', '.join(missing)}, but a "
            f"DTensor has a placement on every mesh dim: add e.g. R@{missing[0]} or I@{missing[0]}"
        )
    return [(name, given[name]) for name in names]


def shard_placement(tensor_type: TensorType, dim: int, index: int, mesh: DeviceMesh) -> Placement:
    """The placement of mesh dim ``index``, which shards tensor dim ``dim`` in ``tensor_type``."""
    group = tensor_type.shard_axes(dim)
    if len(group) == 1:
        return Shard(dim)
    unordered = [axis for axis in group if tensor_type.as_dict()[axis].order is None]
    if unordered:
        raise ValueError(
            f"dim {dim} is sharded by {', '.join(group)} with no order for "
            f"{', '.join(unordered)}; the order decides which rank holds which part. Write "
            f"S({dim})@({', '.join(group)}) with the major axis first."
        )
    names = dim_names(mesh)
    return nested_shard(dim, [names.index(axis) for axis in group], index, mesh)


# --------------------------------------------------------------------------
# Comparing placements
# --------------------------------------------------------------------------


def same_placements(a: Sequence[Placement], b: Sequence[Placement], ndim: int) -> bool:
    """``a`` and ``b`` are the same layout of an ``ndim``-dim tensor (negative shard dims normalised)."""

    def norm(p: Placement) -> Placement:
        if isinstance(p, _StridedShard):
            return _StridedShard(p.dim % ndim, split_factor=_split_factor(p))
        if isinstance(p, Shard):
            return Shard(p.dim % ndim)
        return p

    return len(a) == len(b) and all(norm(x) == norm(y) for x, y in zip(a, b))


def check_even_strided(placements: Sequence[Placement], shape: Sequence[int], mesh: DeviceMesh) -> None:
    """A ``_StridedShard`` means nested shards only where the dim splits evenly."""
    for placement in placements:
        if isinstance(placement, _StridedShard):
            dim = placement.dim % len(shape)
            parts = 1
            for index, other in enumerate(placements):
                if isinstance(other, SHARDS) and other.dim % len(shape) == dim:
                    parts *= mesh.size(index)
            if shape[dim] % parts:
                raise ValueError(
                    f"dim {dim} of size {shape[dim]} does not split evenly into the {parts} parts "
                    f"of its _StridedShard placements; an uneven strided shard is not the nested "
                    f"shard S({dim})@(...) describes"
                )
