"""Typed, differentiable collectives and casts (docs/spec.md#transitions).

Every function takes the tensor, the mesh axis (or a tuple of axes: one
collective on the flattened group, see :mod:`spmd_stubs.mesh`) and the
``src``/``dst`` local SPMD types (``R``, ``I``, ``V``, ``P`` or ``S(i)``).
Other mesh axes pass through unchanged.

* Validity is the algebra's: an invalid or gated ``src``/``dst`` raises
  :class:`spmd_stubs.core.SpmdTypeError` (a ``ValueError``) with the same
  message the type checker prints.
* The backward of every operation is the operation
  :func:`spmd_stubs.core.backward_of` names, run through the same kernels
  (:mod:`spmd_stubs._kernels`), so each table cell has one forward kernel and
  no hand-written backward.
* ``async_op=True`` (the four collectives) starts the collective and returns
  a :class:`spmd_stubs.pending.Pending` whose ``wait()`` gives what the call
  gives, with the same backward (docs/collectives.md#overlap).

Diagrams (docs/spec.md#forward-and-backward): one row per rank of a 3-rank axis, ``=>``
forward, ``<=`` backward (``grad_input <= grad_output``), a value written on
one row only is the same on every rank, ``+`` marks the parts of a pending sum.
V stacks/unbinds on a new leading dim; ``S(i)`` concatenates/splits on dim i.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Sequence, Union, overload

import torch
import torch.distributed as dist

from spmd_stubs import core
from spmd_stubs._collective_args import is_spec, spec_of
from spmd_stubs._dispatch import call_site, typed_call, typed_exchange
from spmd_stubs._overlap import start_collective, start_exchange
from spmd_stubs.core import planner
from spmd_stubs.mesh import AxisLike, axes_label, group_of, mesh_dim_order
from spmd_stubs.pending import Pending
from spmd_stubs.types import AxisAnnotation, P, SpmdTypeLike, to_axis_type

__all__ = [
    "all_reduce",
    "all_reduce_",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "reinterpret",
    "convert",
    "redistribute",
]



# --------------------------------------------------------------------------
# Collectives
# --------------------------------------------------------------------------


@overload
def all_reduce(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike = P,
    dst: SpmdTypeLike,
    op: Literal["sum", "avg"] = "sum",
    group: Optional[dist.ProcessGroup] = None,
    async_op: Literal[False] = False,
) -> torch.Tensor: ...


@overload
def all_reduce(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike = P,
    dst: SpmdTypeLike,
    op: Literal["sum", "avg"] = "sum",
    group: Optional[dist.ProcessGroup] = None,
    async_op: Literal[True],
) -> Pending[torch.Tensor]: ...


def all_reduce(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike = P,
    dst: SpmdTypeLike,
    op: Literal["sum", "avg"] = "sum",
    group: Optional[dist.ProcessGroup] = None,
    async_op: bool = False,
) -> Union[torch.Tensor, Pending[torch.Tensor]]:
    """``all_reduce(x, axis, src=P, dst=R|I)``: resolve the pending sum on every rank.

    ``src=V`` is accepted and means ``reinterpret(V,P)`` first.  ``op="avg"``
    divides the sum by the axis size; its backward is the sum's backward
    divided by the same size (scaling is self-adjoint).  ``src=Pavg`` is that
    average.  ``src=Pmax``/``Pmin`` reduce with max/min; the backward is the
    sum's (``dst=R``: summed over the axis; ``dst=I``: as is), then only the
    ranks whose part attains the result get it, ``k`` tying ranks ``1/k``
    each, as ``torch.amax``'s backward splits ties.

    Forward, both dsts::

        +Ax
        +Ay  =>  Ax + Ay + Az
        +Az

    ``dst=R``: backward ``all_reduce(P,R)`` (self-dual)::

                          +Ax
        Ax + Ay + Az  <=  +Ay
                          +Az

    ``dst=I``: backward ``reinterpret(I,R)``, the identity (Megatron's
    ``reduce_from_tensor_model_parallel_region``)::

        A  <=  A
    """
    average = op != "sum" and _averages(op, src)  # the usual sum needs no check
    if async_op:
        return start_collective("all_reduce", x, axis, src, dst, group=group, average=average)
    return typed_call("all_reduce", x, axis, src, dst, group=group, average=average)


def all_reduce_(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike = P,
    dst: SpmdTypeLike,
    op: Literal["sum", "avg"] = "sum",
    group: Optional[dist.ProcessGroup] = None,
) -> torch.Tensor:
    """``all_reduce_(x, axis, src=P, dst=R|I)``: :func:`all_reduce` written over ``x``, which is returned.

    The gradient sync without a second buffer, as data-parallel trainers
    write it (``dist.all_reduce(p.grad)``)::

        spmd.all_reduce_(p.grad, dp, src=P, dst=R)

    ``x`` then holds the sum, and every view of it or tensor sharing its
    storage too (a flat gradient buffer and its parameters' views).  Not
    differentiable: ``x`` must not require a gradient where autograd
    records.  The checker accepts it where ``x`` keeps a type it can follow:
    a parameter's ``.grad`` (read as the pending gradient either way, see
    docs/porting.md) or an untyped tensor; on any other typed tensor it
    would go on typing ``x`` as the pending sum (``spmd-inplace``).
    """
    average = op != "sum" and _averages(op, src)
    return typed_call("all_reduce", x, axis, src, dst, group=group, average=average, in_place=True)


def _averages(op: str, src: SpmdTypeLike) -> bool:
    """``all_reduce``'s ``op`` other than ``"sum"``: whether it averages (``"avg"``), or its error."""
    if op not in ("sum", "avg"):
        raise ValueError(f'all_reduce op must be "sum" or "avg", got {op!r}')
    if op == "avg" and to_axis_type(src).reduce != "sum":
        raise ValueError(f'all_reduce op="avg" averages a pending sum; src={src!r} already names its reduction')
    return op == "avg"


@overload
def all_gather(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike,
    dst: SpmdTypeLike,
    split_sizes: Optional[Sequence[int]] = None,
    group: Optional[dist.ProcessGroup] = None,
    async_op: Literal[False] = False,
) -> torch.Tensor: ...


@overload
def all_gather(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike,
    dst: SpmdTypeLike,
    split_sizes: Optional[Sequence[int]] = None,
    group: Optional[dist.ProcessGroup] = None,
    async_op: Literal[True],
) -> Pending[torch.Tensor]: ...


def all_gather(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike,
    dst: SpmdTypeLike,
    split_sizes: Optional[Sequence[int]] = None,
    group: Optional[dist.ProcessGroup] = None,
    async_op: bool = False,
) -> Union[torch.Tensor, Pending[torch.Tensor]]:
    """``all_gather(x, axis, src=V|S(i), dst=R|I)``: every rank gets all the parts.

    ``src=V`` stacks the parts on a new dim 0; ``src=S(i)`` concatenates on
    dim i, with part k of size ``split_sizes[k]`` when given (uneven shards).

    Forward::

        A                          [A0, A1]
        B  =>  [A, B, C]           [B0, B1]  =>  [A0, A1, B0, B1, C0, C1]
        C      (src=V)             [C0, C1]      (src=S(0))

    ``dst=R``: backward ``reduce_scatter(P, src)``::

        Ax + Ay + Az      +[Ax, Bx, Cx]
        Bx + By + Bz  <=  +[Ay, By, Cy]
        Cx + Cy + Cz      +[Az, Bz, Cz]

    ``dst=I``: backward ``convert(I, src)``, each rank keeps its slice::

        A
        B  <=  [A, B, C]
        C
    """
    if async_op:
        return start_collective("all_gather", x, axis, src, dst, split_sizes=split_sizes, group=group)
    return typed_call("all_gather", x, axis, src, dst, split_sizes=split_sizes, group=group)


@overload
def reduce_scatter(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike = P,
    dst: SpmdTypeLike,
    split_sizes: Optional[Sequence[int]] = None,
    group: Optional[dist.ProcessGroup] = None,
    async_op: Literal[False] = False,
) -> torch.Tensor: ...


@overload
def reduce_scatter(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike = P,
    dst: SpmdTypeLike,
    split_sizes: Optional[Sequence[int]] = None,
    group: Optional[dist.ProcessGroup] = None,
    async_op: Literal[True],
) -> Pending[torch.Tensor]: ...


def reduce_scatter(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike = P,
    dst: SpmdTypeLike,
    split_sizes: Optional[Sequence[int]] = None,
    group: Optional[dist.ProcessGroup] = None,
    async_op: bool = False,
) -> Union[torch.Tensor, Pending[torch.Tensor]]:
    """``reduce_scatter(x, axis, src=P, dst=V|S(i))``: rank k gets part k of the sum.

    ``dst=V`` unbinds dim 0 (of size the axis size); ``dst=S(i)`` splits dim i,
    into ``split_sizes`` when given.  ``src=V`` means ``reinterpret(V,P)`` first.
    ``src=Pavg|Pmax|Pmin`` reduce with avg/max/min; their backwards are the
    sum's, scaled by ``1/n`` (avg) or split among the ranks attaining the
    extremum (max/min), as in :func:`all_reduce`.

    Forward (``dst=V``)::

        +[Ax, Bx, Cx]      Ax + Ay + Az
        +[Ay, By, Cy]  =>  Bx + By + Bz
        +[Az, Bz, Cz]      Cx + Cy + Cz

    Backward ``all_gather(dst, R)``::

                       A
        [A, B, C]  <=  B
                       C
    """
    if async_op:
        return start_collective("reduce_scatter", x, axis, src, dst, split_sizes=split_sizes, group=group)
    return typed_call("reduce_scatter", x, axis, src, dst, split_sizes=split_sizes, group=group)


@overload
def all_to_all(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike,
    dst: SpmdTypeLike,
    input_split_sizes: Optional[Sequence[int]] = None,
    output_split_sizes: Optional[Sequence[int]] = None,
    group: Optional[dist.ProcessGroup] = None,
    async_op: Literal[False] = False,
) -> torch.Tensor: ...


@overload
def all_to_all(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike,
    dst: SpmdTypeLike,
    input_split_sizes: Optional[Sequence[int]] = None,
    output_split_sizes: Optional[Sequence[int]] = None,
    group: Optional[dist.ProcessGroup] = None,
    async_op: Literal[True],
) -> Pending[torch.Tensor]: ...


def all_to_all(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike,
    dst: SpmdTypeLike,
    input_split_sizes: Optional[Sequence[int]] = None,
    output_split_sizes: Optional[Sequence[int]] = None,
    group: Optional[dist.ProcessGroup] = None,
    async_op: bool = False,
) -> Union[torch.Tensor, Pending[torch.Tensor]]:
    """``all_to_all(x, axis, src=V, dst=V)`` or ``(src=S(i), dst=S(j))``.

    ``(V, V)`` transposes the mesh axis with local dim 0 (of size the axis
    size); ``(S(i), S(j))`` unshards dim i and reshards dim j without
    materialising the whole.  Backward: ``all_to_all(dst, src)``.

    ``(V, V)`` forward; the backward is the same transpose::

        [A0, A1, A2]      [A0, B0, C0]
        [B0, B1, B2]  =>  [A1, B1, C1]
        [C0, C1, C2]      [A2, B2, C2]

    ``(V, V)`` with ``input_split_sizes`` and ``output_split_sizes`` (both,
    one row count per rank): uneven rows, a mixture of experts' token
    dispatch.  This rank's dim 0 is cut into parts of ``input_split_sizes``
    rows, part k going to rank k; the result concatenates on dim 0 the parts
    each rank sent here, ``output_split_sizes[j]`` rows from rank j, which
    must be rank j's ``input_split_sizes`` entry for this rank (exchange
    the counts first: an ``all_to_all(V, V)`` of integers).  The backward
    sends every row's gradient back: the exchange with the two sizes
    swapped.  Forward, rank 0 sending 1 then 2 rows, rank 1 2 then 1::

        [a, b, c]      [a, d, e]
        [d, e, f]  =>  [b, c, f]
    """
    if input_split_sizes is None and output_split_sizes is None:
        if async_op:
            return start_collective("all_to_all", x, axis, src, dst, group=group)
        return typed_call("all_to_all", x, axis, src, dst, group=group)
    if async_op:
        return start_exchange(x, axis, src, dst, group, input_split_sizes, output_split_sizes)
    return typed_exchange(x, axis, src, dst, group, input_split_sizes, output_split_sizes)


# --------------------------------------------------------------------------
# Casts: no communication in the forward
# --------------------------------------------------------------------------


def reinterpret(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike,
    dst: SpmdTypeLike,
    expert_mode: bool = False,
    group: Optional[dist.ProcessGroup] = None,
) -> torch.Tensor:
    """``reinterpret(x, axis, src, dst)``: same local tensor, new type (may change the meaning).

    Valid: ``I->R`` (backward ``all_reduce(P,I)``), ``I->V`` (backward
    ``all_reduce(V,I)``), ``V->P`` (backward ``reinterpret(R,V)``), and with
    ``expert_mode=True``: ``R->I`` (backward ``convert(I,P)``), ``R->V``
    (backward ``reinterpret(V,P)``), ``R->P`` (self-dual; scales the meaning
    by the axis size).  ``V->Pavg|Pmax|Pmin``: the parts of a pending
    avg/max/min (backward the identity).  Shards are not accepted: a
    reinterpret moves no data.

    ``reinterpret(V,P)``::

        A      +A                A
        B  =>  +B    backward    A  <=  A
        C      +C                A

    ``reinterpret(R,P)`` (expert)::

               +A                +A
        A  =>  +A    backward    +A  <=  A
               +A                +A

    ``reinterpret(I,R)``::

        A  =>  A     backward    Ax + Ay + Az  <=  +Ax, +Ay, +Az
    """
    return typed_call("reinterpret", x, axis, src, dst, expert_mode=expert_mode, group=group)


def convert(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike,
    dst: SpmdTypeLike,
    expert_mode: bool = False,
    split_sizes: Optional[Sequence[int]] = None,
    group: Optional[dist.ProcessGroup] = None,
) -> torch.Tensor:
    """``convert(x, axis, src, dst)``: new type, same meaning, no communication.

    Valid: ``R->V|S(i)`` and ``I->V|S(i)`` (rank k keeps part k; backwards
    ``convert(V,P)`` and ``all_gather(V,I)``), ``R->P`` (rank 0 keeps the
    value, the others hold zeros; self-dual), ``I->R`` (identity; backward
    ``all_reduce(P,I)``: Megatron's ``copy_to_tensor_model_parallel_region``),
    and with ``expert_mode=True``: ``I->P`` (backward ``reinterpret(R,I)``),
    ``V|S(i)->P`` (zero-pad; backward ``convert(R,V)``), ``R->I`` (backward
    ``convert(I,P)``).  ``R->Pavg|Pmax|Pmin``: every rank keeps the value, the
    avg/max/min of copies being the value (backward the identity).
    ``split_sizes`` gives uneven ``S(i)`` parts.

    ``convert(R,V)``::

                       A                   +[A, 0, 0]      A
        [A, B, C]  =>  B      backward     +[0, B, 0]  <=  B
                       C                   +[0, 0, C]      C

    ``convert(I,S(0))``::

                                      [A0, A1]
        [A0, A1, B0, B1, C0, C1]  =>  [B0, B1]     backward: all_gather(S(0), I)
                                      [C0, C1]

    ``convert(R,P)``::

                 +[A]                 +[A]
        [A]  =>  +[0]     backward    +[0]  <=  [A]
                 +[0]                 +[0]

    ``convert(V,P)`` (expert)::

        A      +[A, 0, 0]                A
        B  =>  +[0, B, 0]     backward   B  <=  [A, B, C]
        C      +[0, 0, C]                C
    """
    return typed_call("convert", x, axis, src, dst, expert_mode=expert_mode, split_sizes=split_sizes, group=group)


@overload
def redistribute(
    x: torch.Tensor,
    axis: AxisLike,
    *,
    src: SpmdTypeLike,
    dst: SpmdTypeLike,
    group: Optional[dist.ProcessGroup] = None,
) -> torch.Tensor: ...


@overload
def redistribute(x: torch.Tensor, src: Sequence[AxisAnnotation], dst: Sequence[AxisAnnotation], /) -> torch.Tensor: ...


def redistribute(
    x: torch.Tensor,
    axis: Any,
    dst_spec: Optional[Sequence[AxisAnnotation]] = None,
    *,
    src: Optional[SpmdTypeLike] = None,
    dst: Optional[SpmdTypeLike] = None,
    group: Optional[dist.ProcessGroup] = None,
) -> torch.Tensor:
    """Change the type keeping the meaning, communicating where needed.

    ``redistribute(x, tp, src=R, dst=S(0))``: one axis (or a flattened
    tuple).  Routes through :func:`spmd_stubs.core.route` (``all_gather``
    for ``S(i)->R|I``, ``all_reduce`` for ``P->R|I``, ``reduce_scatter`` for
    ``P->S(i)``, ``all_to_all`` for ``S(i)->S(j)``, ``convert`` for the rest)
    and passes ``expert_mode=True``: redistributing is intentional.

    ``redistribute(x, (S(0)@(dp, tp),), (R@dp, R@tp))``: between two
    partition specs (tuples of ``TYPE@axis``; axes left out of both pass
    through).  :func:`spmd_stubs.core.planner.plan` picks the steps, flattening
    same-kind steps on several axes into one collective (here one
    ``all_gather`` over ``(dp, tp)``), and each runs as the typed operation,
    so gradients flow through their backwards.  See docs/redistribute.md.
    """
    if dst_spec is not None or is_spec(axis):
        if src is not None or dst is not None or group is not None:
            raise TypeError(
                "redistribute(x, src_spec, dst_spec) takes the two partition specs only, e.g. "
                "redistribute(x, (S(0)@(dp, tp),), (R@dp, R@tp)); src=/dst=/group= belong to the "
                "per-axis form redistribute(x, tp, src=..., dst=...)"
            )
        return _redistribute_specs(x, axis, dst_spec)
    if src is None or dst is None:
        raise TypeError("redistribute(x, axis, src=..., dst=...) needs both src and dst")
    step = core.route(to_axis_type(src), to_axis_type(dst), axes_label(axis))
    if step is None:
        return x
    return call_site(step.op, axis, step.src, step.dst, expert_mode=True, group=group)(x)


def _redistribute_specs(x: torch.Tensor, src_spec: Any, dst_spec: Any) -> torch.Tensor:
    axes: dict[str, Any] = {}
    src, dst = spec_of(src_spec, "src", axes), spec_of(dst_spec, "dst", axes)
    sizes = {name: dist.get_world_size(group_of(axis)) for name, axis in axes.items()}
    steps = planner.plan(src, dst, sizes=sizes, ndim=x.dim(), mesh_order=mesh_dim_order(tuple(axes)))
    for step in steps:
        group = tuple(axes[name] for name in step.axes)
        x = call_site(step.op, group if len(group) > 1 else group[0], step.src, step.dst, expert_mode=True)(x)
    return x
