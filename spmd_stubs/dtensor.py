"""DTensor interop: placements <-> SPMD types, and typed ``to_local`` / ``from_local``.

A DTensor's placement says how its local tensors make up the global tensor
on each mesh dim; an SPMD type says that too, and also what the local
tensor's *gradient* is.  The two vocabularies line up as follows (docs/dtensor.md
has the full table, with JAX's):

=====================  ==========================================  ====================
SPMD type on an axis   DTensor placement on that mesh dim          local gradient's
                                                                   placement
=====================  ==========================================  ====================
``R``                  ``Replicate()``                             ``Partial()``
``I``                  ``Replicate()``                             ``Replicate()``
``S(d)``               ``Shard(d)``                                ``Shard(d)``
``S(d)@(a, b)``        ``Shard(d)`` on a and b, or a               the same
                       ``_StridedShard`` where b is the earlier
                       mesh dim
``P``                  ``Partial("sum")``                          ``Replicate()``
``Pavg|Pmax|Pmin``     ``Partial("avg"|"max"|"min")``              ``Partial()``
=====================  ==========================================  ====================

* **R or I** is a choice DTensor does not make in the placement: both are
  ``Replicate()``.  It makes it in the gradient, through
  ``to_local(grad_placements=...)`` / ``from_local(grad_placements=...)``:
  ``Partial()`` there is R (every rank's use adds a term to the gradient),
  ``Replicate()`` is I (one logical use).  :func:`spmd_type_of` therefore
  needs ``replicate=R|I`` (or the ``grad_placements``) wherever a placement
  is ``Replicate()``, and :func:`to_local` / :func:`from_local` pass the
  gradient placements the types imply.
* **Several mesh dims sharding one tensor dim** form one ordered group,
  major first: ``S(0)@(dp, tp)`` splits dim 0 over dp and each part over tp.
  DTensor's default (every placement a plain ``Shard``) is mesh order; any
  other order is what ``_StridedShard(d, split_factor)`` spells, where the
  split factor of a mesh dim is the product of the sizes of the later mesh
  dims that are more major than it.  Both directions are exact for tensor
  dims that split evenly; :func:`to_local` and :func:`from_local` refuse a
  ``_StridedShard`` over an uneven dim.
* **Partial reductions**: only sum, avg, max and min are SPMD types: they are
  the ones a replicated value can be partitioned into exactly (seed 001).
  ``Partial("product")`` and the bitwise reductions raise, as do DTensor's
  internal partial subclasses (``_MaskPartial``, ``_NormPartial``), whose
  local tensors are not plain parts of a pending reduction.

Gradients of pending avg/max/min: DTensor gives the local tensor of any
``Partial`` placement a ``Replicate()`` gradient in ``from_local``'s backward,
which is the derivative only for a sum (each part of ``mean`` gets ``g/n``;
of ``max``, the parts attaining it share ``g``).  :func:`from_local` adds that
share, so a ``Pavg``/``Pmax``/``Pmin`` local tensor gets the gradient the
typed collectives give it; for max/min that costs two all-reduces in the
backward (the extremum and the number of ranks tying for it).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence, Union

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.placement_types import Partial, Placement, Replicate, Shard, _StridedShard

from spmd_stubs import core
from spmd_stubs._comm import all_reduce_on
from spmd_stubs._kernels import Comm, partial_share
from spmd_stubs.core import AxisType, Kind, TensorType
from spmd_stubs.types import AxisAnnotation, MeshAxis, R, axis_name, tensor_type_of, to_axis_type

__all__ = ["spmd_type_of", "placements_of", "grad_placements_of", "to_local", "from_local"]

ReplicateChoice = Union[Any, Mapping[Union[str, type[MeshAxis]], Any]]
"""``R`` or ``I`` for every ``Replicate()`` dim, or a mapping axis -> ``R``/``I``."""

TypeLike = Union[TensorType, Iterable[AxisAnnotation]]
"""A :class:`~spmd_stubs.core.TensorType`, or ``TYPE@axis`` entries such as ``(R@tp, S(0)@dp)``."""

_SHARDS = (Shard, _StridedShard)
"""Shard-like placements (``_StridedShard`` is not a ``Shard`` subclass)."""

_UNSUPPORTED_REDUCTIONS = {
    "product": "partitioning a replicated value into a pending product needs an n-th root, "
    "which is inexact and undefined for negative values",
    "band": "a bitwise reduction has no inverse that partitions a replicated value exactly",
    "bor": "a bitwise reduction has no inverse that partitions a replicated value exactly",
    "bxor": "a bitwise reduction has no inverse that partitions a replicated value exactly",
}


# --------------------------------------------------------------------------
# The mesh
# --------------------------------------------------------------------------


def _dim_names(mesh: DeviceMesh) -> tuple[str, ...]:
    names = mesh.mesh_dim_names
    if not names:
        raise ValueError(
            "SPMD types name mesh axes, so the DeviceMesh needs mesh_dim_names, e.g. "
            'init_device_mesh("cuda", (2, 4), mesh_dim_names=("dp", "tp"))'
        )
    return tuple(names)


def _checked_length(placements: Sequence[Placement], mesh: DeviceMesh) -> None:
    if len(placements) != mesh.ndim:
        raise ValueError(
            f"{len(placements)} placements for a {mesh.ndim}-dim mesh {_dim_names(mesh)}: "
            "a DTensor has exactly one placement per mesh dim"
        )


# --------------------------------------------------------------------------
# Placements -> types
# --------------------------------------------------------------------------


def spmd_type_of(
    placements: Sequence[Placement],
    mesh: DeviceMesh,
    *,
    replicate: Optional[ReplicateChoice] = None,
    grad_placements: Optional[Sequence[Placement]] = None,
) -> TensorType:
    """The SPMD type of a DTensor's local tensor with ``placements`` on ``mesh``.

    ``Replicate()`` is R or I, which the placement does not say: pass
    ``replicate=R`` or ``replicate=I`` (or ``{tp: I, dp: R}``), or the
    ``grad_placements`` the local tensor's gradient will have (``Partial()``:
    R, ``Replicate()``: I), the way ``DTensor.to_local(grad_placements=...)``
    is told.  Shards of one tensor dim over several mesh dims become one
    ordered group (``Shard``/``_StridedShard`` decoded to their order).
    Raises ``ValueError`` for what has no SPMD type, saying why.
    """
    names = _dim_names(mesh)
    placements = tuple(placements)
    _checked_length(placements, mesh)
    if grad_placements is not None:
        grad_placements = tuple(grad_placements)
        _checked_length(grad_placements, mesh)
    orders = _shard_orders(placements, mesh)
    mapping: dict[str, AxisType] = {}
    for index, (name, placement) in enumerate(zip(names, placements)):
        if isinstance(placement, _SHARDS):
            mapping[name] = core.Shard(placement.dim, orders[index])
        elif isinstance(placement, Replicate):
            grad = grad_placements[index] if grad_placements is not None else None
            mapping[name] = _replicate_type(name, replicate, grad)
        elif isinstance(placement, Partial):
            mapping[name] = _partial_type(name, placement)
        else:
            raise ValueError(f"placement {placement!r} on mesh dim {name} has no SPMD type")
    return TensorType.of(mapping)


def _replicate_type(name: str, choice: Optional[ReplicateChoice], grad: Optional[Placement]) -> AxisType:
    chosen = _chosen(name, choice)
    from_grad = None
    if grad is not None:
        if isinstance(grad, Replicate):
            from_grad = core.Invariant
        elif type(grad) is Partial and grad.reduce_op == "sum":
            from_grad = core.Replicate
        else:
            raise ValueError(
                f"mesh dim {name} is Replicate() with gradient placement {grad!r}: a replicated "
                "value's gradient is Partial() (R: each rank's use adds a term) or Replicate() "
                "(I: one logical use)"
            )
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


def _partial_type(name: str, placement: Partial) -> AxisType:
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


def _shard_orders(placements: tuple[Placement, ...], mesh: DeviceMesh) -> list[Optional[int]]:
    """Each mesh dim's order (0 major) among the mesh dims sharding its tensor dim.

    None where a tensor dim is sharded by one mesh dim only.  Decoded as
    DTensor decodes ``_StridedShard``: walking the mesh dims last to first, a
    mesh dim's split factor is the product of the sizes of the later mesh dims
    placed before it (more major) in the order built so far.
    """
    names = _dim_names(mesh)
    by_dim: dict[int, list[int]] = {}
    for index, placement in enumerate(placements):
        if isinstance(placement, _SHARDS):
            by_dim.setdefault(placement.dim, []).append(index)
    orders: list[Optional[int]] = [None] * len(placements)
    for dim, mesh_dims in by_dim.items():
        major_first: list[int] = []
        for index in reversed(mesh_dims):
            factor = _split_factor(placements[index])
            position = _prefix_with_product(major_first, factor, mesh)
            if position is None:
                raise ValueError(
                    f"{placements[index]!r} on mesh dim {names[index]} has split factor {factor}, "
                    f"which no order of the later mesh dims sharding dim {dim} "
                    f"({', '.join(names[i] for i in major_first) or 'none'}) gives: it is not a "
                    "layout that nested shards of the dim describe"
                )
            major_first.insert(position, index)
        if len(mesh_dims) > 1:
            for order, index in enumerate(major_first):
                orders[index] = order
    return orders


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


# --------------------------------------------------------------------------
# Types -> placements
# --------------------------------------------------------------------------


def _as_tensor_type(value: TypeLike) -> TensorType:
    if isinstance(value, TensorType):
        return value
    return tensor_type_of(value)


def _types_per_dim(tensor_type: TensorType, mesh: DeviceMesh) -> list[tuple[str, AxisType]]:
    """The type on every mesh dim, in mesh order; every mesh dim and only those."""
    names = _dim_names(mesh)
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


def placements_of(tensor_type: TypeLike, mesh: DeviceMesh) -> tuple[Placement, ...]:
    """The DTensor placements of a local tensor of ``tensor_type`` on ``mesh``.

    R and I are both ``Replicate()`` (their difference is the gradient's, see
    :func:`grad_placements_of`); ``S(d)`` is ``Shard(d)``, and an ordered
    group ``S(d)@(a, b)`` uses ``_StridedShard`` where its order is not mesh
    order; ``P``/``Pavg``/``Pmax``/``Pmin`` are ``Partial(op)``.  A bare V has
    no placement (a DTensor shard names its tensor dim: write ``S(d)``).
    """
    tensor_type = _as_tensor_type(tensor_type)
    per_dim = _types_per_dim(tensor_type, mesh)
    names = [name for name, _ in per_dim]
    out: list[Placement] = []
    for index, (name, axis_type) in enumerate(per_dim):
        if axis_type.kind in (Kind.R, Kind.I):
            out.append(Replicate())
        elif axis_type.kind is Kind.P:
            out.append(Partial(axis_type.reduce))
        elif axis_type.shard is None:
            raise ValueError(
                f"V@{name} has no DTensor placement: V has no global meaning, a DTensor shard names "
                f"the tensor dim it splits. Write S(d)@{name} for the dim d."
            )
        else:
            out.append(_shard_placement(tensor_type, axis_type.shard, names, index, mesh))
    return tuple(out)


def _shard_placement(tensor_type: TensorType, dim: int, names: list[str], index: int, mesh: DeviceMesh) -> Placement:
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
    order = [names.index(axis) for axis in group]
    position = order.index(index)
    factor = 1
    for earlier in order[:position]:
        if earlier > index:
            factor *= mesh.size(earlier)
    return Shard(dim) if factor == 1 else _StridedShard(dim, split_factor=factor)


def grad_placements_of(tensor_type: TypeLike, mesh: DeviceMesh) -> tuple[Placement, ...]:
    """The placements of the gradient of a local tensor of ``tensor_type``: ``to_local``'s ``grad_placements``.

    R -> ``Partial()`` (a pending sum of the ranks' terms), I -> ``Replicate()``,
    shards -> their own placements, P -> ``Replicate()`` (every part gets the
    whole gradient), Pavg/Pmax/Pmin -> ``Partial()`` (each rank holds its share
    of the reduced value's gradient: ``g/n``, or ``g`` split among the ranks
    attaining the extremum; the shares add up to ``g``).
    """
    tensor_type = _as_tensor_type(tensor_type)
    forward = placements_of(tensor_type, mesh)
    out: list[Placement] = []
    for (_, axis_type), placement in zip(_types_per_dim(tensor_type, mesh), forward):
        if axis_type.kind is Kind.R:
            out.append(Partial())
        elif axis_type.kind is Kind.I or axis_type == core.Partial:
            out.append(Replicate())
        elif axis_type.kind is Kind.P:
            out.append(Partial())
        else:
            out.append(placement)
    return tuple(out)


def _same_placements(a: Sequence[Placement], b: Sequence[Placement], ndim: int) -> bool:
    def norm(p: Placement) -> Placement:
        if isinstance(p, _StridedShard):
            return _StridedShard(p.dim % ndim, split_factor=_split_factor(p))
        if isinstance(p, Shard):
            return Shard(p.dim % ndim)
        return p

    return len(a) == len(b) and all(norm(x) == norm(y) for x, y in zip(a, b))


def _check_even_strided(placements: Sequence[Placement], shape: Sequence[int], mesh: DeviceMesh) -> None:
    """A ``_StridedShard`` means nested shards only where the dim splits evenly."""
    for placement in placements:
        if isinstance(placement, _StridedShard):
            dim = placement.dim % len(shape)
            parts = 1
            for index, other in enumerate(placements):
                if isinstance(other, _SHARDS) and other.dim % len(shape) == dim:
                    parts *= mesh.size(index)
            if shape[dim] % parts:
                raise ValueError(
                    f"dim {dim} of size {shape[dim]} does not split evenly into the {parts} parts "
                    f"of its _StridedShard placements; an uneven strided shard is not the nested "
                    f"shard S({dim})@(...) describes"
                )


# --------------------------------------------------------------------------
# to_local / from_local
# --------------------------------------------------------------------------


def to_local(dt: DTensor, *axis_types: AxisAnnotation) -> torch.Tensor:
    """``dt``'s local tensor, typed ``axis_types`` (one ``TYPE@axis`` per mesh dim).

    The types must describe ``dt``'s placements (R or I for ``Replicate()``),
    else ``ValueError``.  The gradient that reaches the local tensor is handed
    to DTensor with the placements the types imply (:func:`grad_placements_of`):
    with R it is a pending sum over the axis (DTensor sums it where it needs
    the value), with I it is already the whole gradient.
    """
    if not isinstance(dt, DTensor):
        raise TypeError(f"to_local takes a DTensor, got {type(dt).__name__}")
    tensor_type = tensor_type_of(axis_types)
    mesh = dt.device_mesh
    expected = placements_of(tensor_type, mesh)
    actual = _ordered_placements(dt)
    if not _same_placements(expected, actual, dt.ndim):
        raise ValueError(
            f"to_local: the types {tensor_type} are the placements {list(expected)}, but the "
            f"DTensor has {list(actual)}; its type is {_describe(actual, mesh)}"
        )
    _check_even_strided(actual, dt.shape, mesh)
    return dt.to_local(grad_placements=grad_placements_of(tensor_type, mesh))


def _ordered_placements(dt: DTensor) -> tuple[Placement, ...]:
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
        mesh_dims = list(entry.mesh_dims)
        for position, index in enumerate(mesh_dims):
            factor = 1
            for earlier in mesh_dims[:position]:
                if earlier > index:
                    factor *= dt.device_mesh.size(earlier)
            out[index] = Shard(entry.tensor_dim) if factor == 1 else _StridedShard(entry.tensor_dim, split_factor=factor)
    return tuple(out)


def _describe(placements: Sequence[Placement], mesh: DeviceMesh) -> str:
    """The type of ``placements`` for an error message, a ``Replicate()`` dim as ``(R or I)@dp``."""
    try:
        text = str(spmd_type_of(placements, mesh, replicate=R))
    except ValueError as err:
        return f"none ({err})"
    for name, placement in zip(_dim_names(mesh), placements):
        if isinstance(placement, Replicate):
            text = text.replace(f"R@{name}", f"(R or I)@{name}")
    return text


def from_local(
    x: torch.Tensor,
    mesh: DeviceMesh,
    *axis_types: AxisAnnotation,
    shape: Optional[torch.Size] = None,
    stride: Optional[tuple[int, ...]] = None,
    placements: Optional[Sequence[Placement]] = None,
) -> DTensor:
    """A DTensor on ``mesh`` whose local tensor is ``x``, typed ``axis_types`` (one per mesh dim).

    The placements are :func:`placements_of` the types (``placements=``, when
    given, must equal them: a check for code that already has them).  The
    gradient ``x`` gets is the one its type asks for: R a pending sum, I and P
    the whole gradient, shards their part, Pavg ``g/n``, Pmax/Pmin ``g`` split
    among the ranks attaining the extremum.  ``shape``/``stride`` as in
    ``DTensor.from_local`` (needed for uneven shards).
    """
    tensor_type = tensor_type_of(axis_types)
    wanted = placements_of(tensor_type, mesh)
    if placements is not None and not _same_placements(wanted, tuple(placements), x.dim()):
        raise ValueError(
            f"from_local: the types {tensor_type} are the placements {list(wanted)}, not "
            f"{list(placements)}; the placements' type is {_describe(tuple(placements), mesh)}"
        )
    per_dim = _types_per_dim(tensor_type, mesh)
    _check_one_reduction(per_dim)
    grads: list[Placement] = []
    for index, ((name, axis_type), placement) in enumerate(zip(per_dim, wanted)):
        if axis_type.kind is Kind.R:
            grads.append(Partial())
        elif axis_type.kind in (Kind.I, Kind.P):
            grads.append(Replicate())
            if axis_type.reduce != "sum" and x.requires_grad:
                x = _Share.apply(x, _comm_of(mesh, name), axis_type.reduce)
        else:
            grads.append(placement)
    dt = DTensor.from_local(x, mesh, wanted, shape=shape, stride=stride, grad_placements=grads)
    _check_even_strided(wanted, dt.shape, mesh)
    return dt


def _check_one_reduction(per_dim: list[tuple[str, AxisType]]) -> None:
    """A pending avg/max/min may share the tensor with no other pending reduction.

    Reductions over two mesh dims compose in an order the placements do not
    state (the max of sums is not the sum of maxes), and each rank's share of
    the gradient of the whole depends on it.
    """
    partial = [(name, t) for name, t in per_dim if t.kind is Kind.P]
    if len(partial) > 1 and any(t.reduce != "sum" for _, t in partial):
        shown = ", ".join(t.on(name) for name, t in partial)
        raise ValueError(
            f"from_local: {shown} pends a reduction over several mesh dims, one of them not a sum; "
            "which is reduced first changes the value, and placements do not say. Resolve all but "
            "one of them first (e.g. spmd.all_reduce over the others)."
        )


def _comm_of(mesh: DeviceMesh, name: str) -> Comm:
    group = mesh.get_group(name)
    return Comm(group, mesh.size(_dim_names(mesh).index(name)), None, name)


class _Share(torch.autograd.Function):
    """Identity forward; backward: the whole gradient of a pending avg/max/min -> this rank's share."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, comm: Comm, reduce: str) -> torch.Tensor:
        ctx.comm, ctx.reduce = comm, reduce
        ctx.save_for_backward(x)
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (x,) = ctx.saved_tensors
        comm, reduce = ctx.comm, ctx.reduce
        reduced = all_reduce_on(x.detach(), comm.group, reduce) if reduce != "avg" else x
        return grad * partial_share(x.detach(), reduced, comm, reduce), None, None
