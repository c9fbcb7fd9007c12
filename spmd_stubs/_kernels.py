"""The forward kernels the rows of the algebra's transition table name.

Each row of :data:`spmd_stubs.core.TRANSITIONS` names its forward kernel, and
:data:`KERNELS` maps the names to the functions.  A kernel maps the local
tensor of one rank to its result, given the group (:class:`Comm`) and the
src/dst types.  The varying side of an operation is laid out by its type:
``V`` stacks/unbinds on a new leading dim, ``S(i)`` concatenates/splits on
dim ``i`` (negative dims count from the end, uneven parts where
``split_sizes`` says so).  Backwards are not written here: they are the
kernels of the operations :func:`spmd_stubs.core.backward_of` names, and for
a pending max/min that :func:`partial_share` then splits among the ranks.

A pending reduction other than the sum (``Pavg``, ``Pmax``, ``Pmin``) reaches
the same rows: ``all_reduce``/``reduce_scatter`` reduce with max/min (a pending
avg is the sum, divided by the group size by the caller), and ``convert(R, Pop)``
keeps the value on every rank, which is exact for avg/max/min
(docs/spec.md#pending-reductions).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable, Optional

import torch
import torch.distributed as dist

from spmd_stubs import core
from spmd_stubs._comm import (
    all_gather_on,
    all_reduce_into,
    all_reduce_on,
    all_to_all_rows,
    group_all_gather,
    group_all_reduce,
    group_all_reduce_,
    group_all_to_all,
    group_reduce_scatter,
    reduce_scatter_on,
)
from spmd_stubs._ranks import per_rank
from spmd_stubs.core import AxisType

__all__ = ["Comm", "Direct", "IN_PLACE_KERNELS", "KERNELS", "Kernel", "direct_run", "partial_share"]


@dataclass(frozen=True)
class Comm:
    """Where an operation runs: the group, its size, uneven part sizes, the axis label."""

    group: dist.ProcessGroup
    size: int
    split_sizes: Optional[tuple[int, ...]]
    axis: str


Kernel = Callable[[torch.Tensor, Comm, AxisType, AxisType], torch.Tensor]


# --------------------------------------------------------------------------
# Layout of the varying side: parts per rank
# --------------------------------------------------------------------------


def _part_sizes(comm: Comm, length: int, dim: int) -> list[int]:
    """Sizes along ``dim`` of the ``comm.size`` parts of a whole of ``length``."""
    if comm.split_sizes is not None:
        sizes = list(comm.split_sizes)
        if len(sizes) != comm.size or sum(sizes) != length:
            raise ValueError(
                f"split_sizes={sizes} must give one size per rank of axis {comm.axis} "
                f"({comm.size}) summing to the size of dim {dim} ({length})"
            )
        return sizes
    if length % comm.size:
        raise ValueError(
            f"dim {dim} has size {length}, which does not split evenly over the "
            f"{comm.size} ranks of axis {comm.axis}; pass split_sizes= for uneven parts"
        )
    return [length // comm.size] * comm.size


def _leading(x: torch.Tensor, comm: Comm) -> None:
    """V stacks on a new dim 0: the whole has one entry per rank there."""
    if x.dim() == 0 or x.size(0) != comm.size:
        raise ValueError(
            f"a varying (V) value on axis {comm.axis} stacks one part per rank on dim 0, "
            f"so dim 0 must have size {comm.size}; got shape {tuple(x.shape)} "
            f"(use S(i) to concatenate on a dim instead)"
        )


def _shard_dim(layout: AxisType, x: torch.Tensor, comm: Comm) -> int:
    """The non-negative tensor dim of ``S(i)``, checked against ``x``'s rank."""
    assert layout.shard is not None
    if not -x.dim() <= layout.shard < x.dim():
        raise ValueError(
            f"{layout}@{comm.axis} names dim {layout.shard}, but the tensor has shape "
            f"{tuple(x.shape)} ({x.dim()} dims); a shard dim must be in "
            f"[{-x.dim()}, {x.dim() - 1}]"
        )
    return layout.shard % x.dim()


def _split(whole: torch.Tensor, comm: Comm, layout: AxisType) -> list[torch.Tensor]:
    """The per-rank parts of ``whole`` under ``layout`` (V or S(i))."""
    if layout.shard is None:
        _leading(whole, comm)
        return list(whole.unbind(0))
    dim = _shard_dim(layout, whole, comm)
    return list(torch.split(whole, _part_sizes(comm, whole.size(dim), dim), dim))


def _check_whole(whole: torch.Tensor, comm: Comm, layout: AxisType) -> None:
    """``whole`` splits into equal parts under ``layout``, or a clear error."""
    if layout.shard is None:
        _leading(whole, comm)
    else:
        _part_sizes(comm, whole.size(layout.shard), layout.shard)


def _join(parts: list[torch.Tensor], layout: AxisType) -> torch.Tensor:
    """The inverse of :func:`_split`."""
    if layout.shard is None:
        return torch.stack(parts)
    return torch.cat(parts, layout.shard)


def _pad_to(t: torch.Tensor, dim: int, length: int) -> torch.Tensor:
    """``t`` zero-padded at the end of ``dim`` to ``length`` (uneven collectives)."""
    shape = list(t.shape)
    shape[dim] = length - t.size(dim)
    return torch.cat([t, t.new_zeros(shape)], dim)


def _checked_part(t: torch.Tensor, comm: Comm, index: int, dim: int) -> torch.Tensor:
    """This rank's part, checked against its entry of ``split_sizes`` (if given)."""
    if comm.split_sizes is not None and t.size(dim) != comm.split_sizes[index]:
        raise ValueError(
            f"rank {index} of axis {comm.axis} holds {t.size(dim)} entries on dim {dim}, "
            f"but split_sizes[{index}] is {comm.split_sizes[index]}"
        )
    return t


# --------------------------------------------------------------------------
# Communication on a stacked dim 0 (the primitives are in spmd_stubs._comm)
# --------------------------------------------------------------------------


def _gather_stacked(x: torch.Tensor, comm: Comm) -> torch.Tensor:
    """Every rank's ``x`` stacked on a new dim 0, in group rank order."""
    return all_gather_on(x.unsqueeze(0), 0, comm.group, comm.size)


def _reduce_scatter_stacked(x: torch.Tensor, comm: Comm, op: str = "sum") -> torch.Tensor:
    """Entry ``k`` of dim 0 of the rank sum (or ``op``), on rank ``k`` (dim 0 has size ``comm.size``)."""
    return reduce_scatter_on(x, 0, comm.group, comm.size, op).squeeze(0)


def _exchange_stacked(x: torch.Tensor, comm: Comm) -> torch.Tensor:
    """Entry ``j`` of dim 0 goes to rank ``j``; the result's entry ``j`` came from rank ``j``."""
    return all_to_all_rows(x, comm.group)


# --------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------


def _identity(x: torch.Tensor, comm: Comm, src: AxisType, dst: AxisType) -> torch.Tensor:
    """reinterpret(*), convert(I,R), convert(R,I): only the type (the backward) changes."""
    # A new tensor object, so autograd records the typed operation's node.
    return x.view_as(x)


def _keep_slice(x: torch.Tensor, comm: Comm, src: AxisType, dst: AxisType) -> torch.Tensor:
    """convert(R|I, V|S(i)): rank k keeps part k of the whole."""
    # A copy, not a view: the result may be modified in place like any tensor.
    return per_rank(x, comm.group, lambda k, t: _split(t, comm, dst)[k].clone())


def _keep_first(x: torch.Tensor, comm: Comm, src: AxisType, dst: AxisType) -> torch.Tensor:
    """convert(R|I, P): rank 0 keeps the value, the others hold zeros, so the sum is the value.

    A pending avg/max/min of copies of the value is the value: every rank keeps it.
    """
    if dst.reduce != "sum":
        return _identity(x, comm, src, dst)
    return per_rank(x, comm.group, lambda k, t: t.clone() if k == 0 else torch.zeros_like(t))


def _zero_pad(x: torch.Tensor, comm: Comm, src: AxisType, dst: AxisType) -> torch.Tensor:
    """convert(V|S(i), P): rank k places its part at position k of a zero whole."""

    def place(index: int, t: torch.Tensor) -> torch.Tensor:
        if src.shard is None:
            parts = [t if j == index else torch.zeros_like(t) for j in range(comm.size)]
            return torch.stack(parts)
        dim = _shard_dim(src, t, comm)
        sizes = comm.split_sizes or (t.size(dim),) * comm.size
        _checked_part(t, comm, index, dim)
        return torch.cat([t if j == index else _zeros_part(t, dim, s) for j, s in enumerate(sizes)], dim)

    return per_rank(x, comm.group, place)


def _zeros_part(t: torch.Tensor, dim: int, length: int) -> torch.Tensor:
    shape = list(t.shape)
    shape[dim] = length
    return t.new_zeros(shape)


_REDUCED_WITH = {"sum": "sum", "avg": "sum", "max": "max", "min": "min"}
"""A pending reduction -> what the communication reduces with (an avg divides the sum afterwards).

A lookup, not a function: the kernels ask on every call.
"""


def _all_reduce(x: torch.Tensor, comm: Comm, src: AxisType, dst: AxisType) -> torch.Tensor:
    """all_reduce(P, R|I): every rank gets the sum (the max, the min)."""
    return all_reduce_on(x, comm.group, _REDUCED_WITH[src.reduce])


def _all_reduce_in_place(x: torch.Tensor, comm: Comm, src: AxisType, dst: AxisType) -> torch.Tensor:
    """``all_reduce_``: :func:`_all_reduce`'s result written over ``x``, which is returned."""
    return all_reduce_into(x, comm.group, _REDUCED_WITH[src.reduce])


def _all_gather(x: torch.Tensor, comm: Comm, src: AxisType, dst: AxisType) -> torch.Tensor:
    """all_gather(V|S(i), R|I): every rank gets the parts stacked (V) or concatenated (S(i))."""
    if src.shard is None:
        return _gather_stacked(x, comm)
    dim = _shard_dim(src, x, comm)
    if comm.split_sizes is None:
        # Equal parts: concatenated by the collective itself, no extra copy.
        return all_gather_on(x, dim, comm.group, comm.size)
    gathered = _gather_stacked(_padded_part(x, comm, src), comm)
    parts = [part.narrow(dim, 0, size) for part, size in zip(gathered.unbind(0), comm.split_sizes)]
    return torch.cat(parts, dim)


def _padded_part(x: torch.Tensor, comm: Comm, layout: AxisType) -> torch.Tensor:
    """This rank's uneven part, zero-padded to the longest so ranks can gather it."""
    assert comm.split_sizes is not None and layout.shard is not None
    dim = _shard_dim(layout, x, comm)
    longest = max(comm.split_sizes)
    return per_rank(x, comm.group, lambda k, t: _pad_to(_checked_part(t, comm, k, dim), dim, longest))


def _reduce_scatter(x: torch.Tensor, comm: Comm, src: AxisType, dst: AxisType) -> torch.Tensor:
    """reduce_scatter(P, V|S(i)): rank k gets part k of the sum (the max, the min)."""
    op = _REDUCED_WITH[src.reduce]
    if dst.shard is None:
        _check_whole(x, comm, dst)
        return _reduce_scatter_stacked(x, comm, op)
    dim = _shard_dim(dst, x, comm)
    if comm.split_sizes is None:
        _check_whole(x, comm, dst)
        return reduce_scatter_on(x, dim, comm.group, comm.size, op)
    longest = max(comm.split_sizes)
    parts = _split(x, comm, dst)
    # The padding is cut off again, so its value never matters, not even for max/min.
    mine = _reduce_scatter_stacked(torch.stack([_pad_to(p, dim, longest) for p in parts]), comm, op)
    sizes = comm.split_sizes
    return per_rank(mine, comm.group, lambda k, t: t.narrow(dim, 0, sizes[k]).clone())


def _all_to_all(x: torch.Tensor, comm: Comm, src: AxisType, dst: AxisType) -> torch.Tensor:
    """all_to_all(V,V): swap the mesh axis with dim 0; all_to_all(S(i),S(j)): cat on i, split on j."""
    if _on_dim0(src, x, comm) and _on_dim0(dst, x, comm):
        # V/V and S(0)/S(0): dim 0 already holds one chunk per rank, in order.
        _check_whole(x, comm, dst)
        return _exchange_stacked(x, comm)
    received = _exchange_stacked(_join(_split(x, comm, dst), core.Varying), comm)
    return _join(list(received.unbind(0)), src)


def _on_dim0(layout: AxisType, x: torch.Tensor, comm: Comm) -> bool:
    return layout.shard is None or _shard_dim(layout, x, comm) == 0


# --------------------------------------------------------------------------
# The gradient of a pending reduction other than the sum
# --------------------------------------------------------------------------


def partial_share(x: torch.Tensor, reduced: torch.Tensor, comm: Comm, reduce: str) -> torch.Tensor:
    """``d reduced / d x`` on this rank, elementwise: this rank's share of the reduced value's gradient.

    ``x`` is this rank's part of a pending ``reduce``, ``reduced`` the reduction
    over the group in ``x``'s layout.  avg: ``1/n`` everywhere.  max/min: 1 where
    this rank's part attains the result and no other rank's does; ``k`` ranks
    tying share it as ``1/k`` each, as ``torch.amax``'s backward does (one
    all-reduce counts them).  The share is a constant for autograd: max and min
    are piecewise linear, so a gradient of the gradient sees the same share.
    """
    if reduce == "avg":
        return x.new_full((), 1.0 / comm.size)
    if reduce not in ("max", "min"):
        raise ValueError(f"partial_share is for a pending avg, max or min, not {reduce!r}")
    with torch.no_grad():
        attains = (x == reduced).to(x.dtype)
        ties = all_reduce_on(attains, comm.group, "sum")
        # A NaN attains nothing anywhere: no share instead of 0/0.
        return attains / ties.clamp_min(1)


KERNELS: dict[str, Kernel] = {
    "identity": _identity,
    "keep_slice": _keep_slice,
    "keep_first": _keep_first,
    "zero_pad": _zero_pad,
    "all_reduce": _all_reduce,
    "all_gather": _all_gather,
    "reduce_scatter": _reduce_scatter,
    "all_to_all": _all_to_all,
}
"""Kernel name -> forward kernel; :data:`spmd_stubs.core.TRANSITIONS` names one per row."""

IN_PLACE_KERNELS: dict[str, Kernel] = {"all_reduce": _all_reduce_in_place}
"""Kernel name -> its in-place form, which writes the result over its input (``all_reduce_``)."""


# --------------------------------------------------------------------------
# An eager call site's kernel, straight to the group
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Direct:
    """A kernel at one eager call site, bound to its group: ``run(x)``.

    For an ``x`` on which the call goes straight to the group
    (:func:`spmd_stubs._comm.straight_to_group`) and, where ``rows`` is set,
    whose dim 0 splits into ``rows`` equal parts; any other ``x`` takes the
    kernel itself, which handles it or says what is wrong.  It does what the
    kernel would, with none of the kernel's layers between the site and the
    group's method.
    """

    run: Callable[[torch.Tensor], torch.Tensor]
    rows: Optional[int] = None


def _direct_all_reduce(comm: Comm, src: AxisType, dst: AxisType) -> Optional[Direct]:
    return Direct(partial(group_all_reduce, comm.group, _REDUCED_WITH[src.reduce]))


def _direct_all_reduce_in_place(comm: Comm, src: AxisType, dst: AxisType) -> Optional[Direct]:
    return Direct(partial(group_all_reduce_, comm.group, _REDUCED_WITH[src.reduce]))


def _direct_all_gather(comm: Comm, src: AxisType, dst: AxisType) -> Optional[Direct]:
    if src.shard != 0 or comm.split_sizes is not None:
        return None
    return Direct(partial(group_all_gather, comm.group, comm.size), rows=1)


def _direct_reduce_scatter(comm: Comm, src: AxisType, dst: AxisType) -> Optional[Direct]:
    if dst.shard != 0 or comm.split_sizes is not None:
        return None
    return Direct(partial(group_reduce_scatter, comm.group, _REDUCED_WITH[src.reduce], comm.size), rows=comm.size)


def _direct_all_to_all(comm: Comm, src: AxisType, dst: AxisType) -> Optional[Direct]:
    if src.shard != 0 or dst.shard != 0 or comm.split_sizes is not None:
        return None
    return Direct(partial(group_all_to_all, comm.group), rows=comm.size)


_DIRECT: dict[Kernel, Callable[[Comm, AxisType, AxisType], Optional[Direct]]] = {
    _all_reduce: _direct_all_reduce,
    _all_reduce_in_place: _direct_all_reduce_in_place,
    _all_gather: _direct_all_gather,
    _reduce_scatter: _direct_reduce_scatter,
    _all_to_all: _direct_all_to_all,
}
"""Kernel -> its direct form at a call site, where it has one: the whole
collective on dim 0 (``S(0)``, equal parts) or any all-reduce."""


def direct_run(kernel: Kernel, comm: Comm, src: AxisType, dst: AxisType) -> Optional[Direct]:
    """``kernel`` on ``comm`` from ``src`` to ``dst``, bound for an eager call site (None: the kernel only)."""
    bind = _DIRECT.get(kernel)
    return None if bind is None else bind(comm, src, dst)
