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
  the ones a replicated value can be partitioned into exactly
  (docs/spec.md#pending-reductions).
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

from typing import Any, Callable, Optional, Sequence, cast

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.placement_types import Partial, Placement, Replicate

from spmd_stubs import core
from spmd_stubs._comm import all_reduce_on
from spmd_stubs._kernels import Comm, partial_share
from spmd_stubs._placements import (
    SHARDS,
    ReplicateChoice,
    TypeLike,
    as_tensor_type,
    check_even_strided,
    checked_length,
    dim_names,
    ordered_placements,
    partial_type,
    replicate_type,
    same_placements,
    shard_orders,
    shard_placement,
    types_per_dim,
)
from spmd_stubs.core import AxisType, Kind, TensorType
from spmd_stubs.types import AxisAnnotation, R, tensor_type_of

__all__ = ["spmd_type_of", "placements_of", "grad_placements_of", "to_local", "from_local"]


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
    names = dim_names(mesh)
    placements = tuple(placements)
    checked_length(placements, mesh)
    grads: tuple[Optional[Placement], ...] = (None,) * len(placements)
    if grad_placements is not None:
        given = tuple(grad_placements)
        checked_length(given, mesh)
        grads = given
    orders = shard_orders(placements, mesh)
    mapping: dict[str, AxisType] = {}
    for name, placement, order, grad in zip(names, placements, orders, grads):
        if isinstance(placement, SHARDS):
            mapping[name] = core.Shard(placement.dim, order)
            _check_gradient_keeps(name, placement, grad, keep=placement)
        elif isinstance(placement, Replicate):
            mapping[name] = replicate_type(name, replicate, grad)
        elif isinstance(placement, Partial):
            mapping[name] = partial_type(name, placement)
            _check_gradient_keeps(
                name, placement, grad, keep=Replicate() if placement.reduce_op == "sum" else Partial()
            )
        else:
            raise ValueError(f"placement {placement!r} on mesh dim {name} has no SPMD type")
    return TensorType.of(mapping)


def _check_gradient_keeps(name: str, placement: Placement, grad: Optional[Placement], *, keep: Placement) -> None:
    """Raise unless ``grad`` (when given) is ``keep``, the one gradient placement that type's gradient has.

    A shard's gradient is the same shard; a pending sum's is the whole
    gradient on every rank (``Replicate()``): with ``Partial()`` DTensor would
    sum the ranks' copies, a gradient the mesh size too large.  A pending
    avg/max/min's is ``Partial()``, as :func:`grad_placements_of` says.
    """
    if grad is not None and grad != keep:
        raise ValueError(
            f"mesh dim {name} is {placement!r} with gradient placement {grad!r}: its local tensor's "
            f"gradient has placement {keep!r}; pass grad_placements with {keep!r} on {name}"
        )


# --------------------------------------------------------------------------
# Types -> placements
# --------------------------------------------------------------------------


def placements_of(tensor_type: TypeLike, mesh: DeviceMesh) -> tuple[Placement, ...]:
    """The DTensor placements of a local tensor of ``tensor_type`` on ``mesh``.

    R and I are both ``Replicate()`` (their difference is the gradient's, see
    :func:`grad_placements_of`); ``S(d)`` is ``Shard(d)``, and an ordered
    group ``S(d)@(a, b)`` uses ``_StridedShard`` where its order is not mesh
    order; ``P``/``Pavg``/``Pmax``/``Pmin`` are ``Partial(op)``.  A bare V has
    no placement (a DTensor shard names its tensor dim: write ``S(d)``).
    """
    tensor_type = as_tensor_type(tensor_type)
    out: list[Placement] = []
    for index, (name, axis_type) in enumerate(types_per_dim(tensor_type, mesh)):
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
            out.append(shard_placement(tensor_type, axis_type.shard, index, mesh))
    return tuple(out)


def grad_placements_of(tensor_type: TypeLike, mesh: DeviceMesh) -> tuple[Placement, ...]:
    """The placements of the gradient of a local tensor of ``tensor_type``: ``to_local``'s ``grad_placements``.

    R -> ``Partial()`` (a pending sum of the ranks' terms), I -> ``Replicate()``,
    shards -> their own placements, P -> ``Replicate()`` (every part gets the
    whole gradient), Pavg/Pmax/Pmin -> ``Partial()`` (each rank holds its share
    of the reduced value's gradient: ``g/n``, or ``g`` split among the ranks
    attaining the extremum; the shares add up to ``g``); docs/spec.md#forward-and-backward.
    """
    tensor_type = as_tensor_type(tensor_type)
    forward = placements_of(tensor_type, mesh)
    out: list[Placement] = []
    for (_, axis_type), placement in zip(types_per_dim(tensor_type, mesh), forward):
        if axis_type.kind is Kind.R:
            out.append(Partial())
        elif axis_type.kind is Kind.I or axis_type == core.Partial:
            out.append(Replicate())
        elif axis_type.kind is Kind.P:
            out.append(Partial())
        else:
            out.append(placement)
    return tuple(out)


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
    actual = ordered_placements(dt)
    if not same_placements(expected, actual, dt.ndim):
        raise ValueError(
            f"to_local: the types {tensor_type} are the placements {list(expected)}, but the "
            f"DTensor has {list(actual)}; its type is {_describe(actual, mesh)}"
        )
    check_even_strided(actual, dt.shape, mesh)
    return dt.to_local(grad_placements=grad_placements_of(tensor_type, mesh))


def _describe(placements: Sequence[Placement], mesh: DeviceMesh) -> str:
    """The type of ``placements`` for an error message, a ``Replicate()`` dim as ``(R or I)@dp``."""
    try:
        text = str(spmd_type_of(placements, mesh, replicate=R))
    except ValueError as err:
        return f"none ({err})"
    for name, placement in zip(dim_names(mesh), placements):
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
    if placements is not None and not same_placements(wanted, tuple(placements), x.dim()):
        raise ValueError(
            f"from_local: the types {tensor_type} are the placements {list(wanted)}, not "
            f"{list(placements)}; the placements' type is {_describe(tuple(placements), mesh)}"
        )
    per_dim = types_per_dim(tensor_type, mesh)
    _check_one_reduction(per_dim)
    # DTensor hands a Partial dim's local tensor the whole gradient, right for
    # a sum only: a pending avg/max/min gets Replicate() and its share below.
    typed_grads = grad_placements_of(tensor_type, mesh)
    grads = [Replicate() if t.kind is Kind.P else g for (_, t), g in zip(per_dim, typed_grads)]
    for name, axis_type in per_dim:
        if axis_type.kind is Kind.P and axis_type.reduce != "sum" and x.requires_grad:
            x = _share(x, _comm_of(mesh, name), axis_type.reduce)
    dt = DTensor.from_local(x, mesh, wanted, shape=shape, stride=stride, grad_placements=grads)
    check_even_strided(wanted, dt.shape, mesh)
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
    return Comm(group, mesh.size(dim_names(mesh).index(name)), None, name)


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


_share = cast("Callable[[torch.Tensor, Comm, str], torch.Tensor]", _Share.apply)
"""``_Share.apply``, which torch leaves unannotated."""
