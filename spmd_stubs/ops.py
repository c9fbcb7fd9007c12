"""Contractions and reductions with an explicit partial result: ``out_partial_axes=``.

docs/spec.md#global-spmd: in global SPMD a contraction or reduction over
a dim sharded on a mesh axis computes, on each rank, only a part of the
global result.  DTensor would silently make the result Partial; here Partial
is **never produced implicitly**, so such a call is a type error
(``spmd-sharded-contraction``) unless it names the axes on which the result
is a pending reduction::

    @spmd.global_spmd(tp)
    def row_parallel(x: Tensor[S(-1)@tp], w: Tensor[S(1)@tp]) -> Tensor[P@tp]:
        return spmd.linear(x, w, out_partial_axes=tp)       # global: one step

    def row_parallel_local(x: Tensor[V@tp], w: Tensor[V@tp]) -> Tensor[P@tp]:
        y = F.linear(x, w)                                 # local: per-rank product
        return spmd.reinterpret(y, tp, src=V, dst=P)       # "I mean the global sum"

Each function here is erasable: at runtime it is the local torch op, then
``reinterpret(V -> P)`` on every axis of ``out_partial_axes``, and that
reinterpret is the identity in the forward and in the backward (its backward
``reinterpret(R -> V)`` passes the gradient through), so the local result is
returned as it is.  ``amax`` / ``amin`` mark the result ``Pmax`` / ``Pmin``
on those axes (a pending max / min), resolved with
``all_reduce(m, tp, src=Pmax, dst=R)``.

The types are the checker's: in local SPMD the result is the local op's type
reinterpreted ``V -> P`` on each named axis (an operand that is not ``V``
there is an error); in global SPMD, the result is ``P`` (``Pmax``/``Pmin``) on
each named axis over which a sharded dim is contracted or reduced.
``out_partial_axes`` is checked at runtime on every call (``TypeError``
unless a mesh axis or a tuple of distinct ones).
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import torch
import torch.nn.functional as F

from spmd_stubs.regions import AxesArg, check_axes

__all__ = ["einsum", "matmul", "linear", "sum", "amax", "amin"]

Dims = Union[int, Sequence[int]]


def _check_partial_axes(out_partial_axes: Optional[AxesArg], op: str) -> None:
    if out_partial_axes is not None:
        check_axes((out_partial_axes,), f"{op}(..., out_partial_axes=...)")


def _check_tensor(x: object, op: str, what: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{op}: {what} must be a tensor, got {type(x).__name__}")


def _check_dims(dim: object, op: str) -> None:
    items = dim if isinstance(dim, (tuple, list)) else (dim,)
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in items):
        raise TypeError(f"{op}: dim must be an int or a sequence of ints, got {dim!r}")


def einsum(equation: str, *operands: torch.Tensor, out_partial_axes: Optional[AxesArg] = None) -> torch.Tensor:
    """``torch.einsum(equation, *operands)``; the result is a pending sum on ``out_partial_axes``.

    Global SPMD (the einsum rule, docs/spec.md#global-spmd): a label sharded on an axis must be
    sharded on it in every operand that uses it (and no operand may be
    sharded on that axis through an unused label).  A contracted label sharded
    on ``a`` needs ``a`` in ``out_partial_axes``; the result is then ``P@a``.
    """
    if not isinstance(equation, str):
        raise TypeError(f"einsum: the equation comes first, as a string such as 'bij,bjk->bik', got {equation!r}")
    _check_partial_axes(out_partial_axes, "einsum")
    for k, operand in enumerate(operands):
        _check_tensor(operand, "einsum", f"operand {k}")
    return torch.einsum(equation, *operands)


def matmul(a: torch.Tensor, b: torch.Tensor, *, out_partial_axes: Optional[AxesArg] = None) -> torch.Tensor:
    """``torch.matmul(a, b)``; the result is a pending sum on ``out_partial_axes``.

    Global SPMD: ``a``'s last dim sharded on ``tp`` with ``b``'s contracted dim
    sharded the same way needs ``out_partial_axes=tp`` and gives ``P@tp``.
    """
    _check_partial_axes(out_partial_axes, "matmul")
    return torch.matmul(a, b)


def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    *,
    out_partial_axes: Optional[AxesArg] = None,
) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` (``x @ weight.T + bias``); a pending sum on ``out_partial_axes``.

    The row-parallel linear of Megatron TP, in global SPMD::

        y = spmd.linear(x, w, out_partial_axes=tp)   # x: S(-1)@tp, w: S(1)@tp -> P@tp
        y = spmd.all_reduce(y, tp, src=P, dst=R)

    A bias is added on every rank: with ``out_partial_axes`` it would be
    summed once per rank, so add it after the reduction instead.
    """
    _check_partial_axes(out_partial_axes, "linear")
    return F.linear(x, weight, bias)


def sum(  # noqa: A001 -- spmd.sum mirrors torch.sum
    x: torch.Tensor,
    dim: Optional[Dims] = None,
    keepdim: bool = False,
    *,
    out_partial_axes: Optional[AxesArg] = None,
) -> torch.Tensor:
    """``torch.sum(x, dim, keepdim)`` (every dim when ``dim`` is None); pending sum on ``out_partial_axes``.

    Global SPMD: summing over a dim sharded on ``tp`` needs
    ``out_partial_axes=tp``: each rank sums its piece, the result is ``P@tp``.
    """
    _check_partial_axes(out_partial_axes, "sum")
    if dim is None:
        return x.sum(dim=tuple(range(x.dim())), keepdim=True) if keepdim else x.sum()
    _check_dims(dim, "sum")
    return torch.sum(x, dim=dim if isinstance(dim, int) else tuple(dim), keepdim=keepdim)


def amax(x: torch.Tensor, dim: Dims, keepdim: bool = False, *, out_partial_axes: Optional[AxesArg] = None) -> torch.Tensor:
    """``torch.amax(x, dim, keepdim)``; a pending max (``Pmax``) on ``out_partial_axes``.

    The local max of a vocab-parallel softmax::

        m = spmd.amax(logits, -1, out_partial_axes=tp)   # logits: S(-1)@tp -> Pmax@tp
        m = spmd.all_reduce(m, tp, src=Pmax, dst=R)
    """
    _check_partial_axes(out_partial_axes, "amax")
    _check_dims(dim, "amax")
    return torch.amax(x, dim=dim if isinstance(dim, int) else tuple(dim), keepdim=keepdim)


def amin(x: torch.Tensor, dim: Dims, keepdim: bool = False, *, out_partial_axes: Optional[AxesArg] = None) -> torch.Tensor:
    """``torch.amin(x, dim, keepdim)``; a pending min (``Pmin``) on ``out_partial_axes``."""
    _check_partial_axes(out_partial_axes, "amin")
    _check_dims(dim, "amin")
    return torch.amin(x, dim=dim if isinstance(dim, int) else tuple(dim), keepdim=keepdim)

