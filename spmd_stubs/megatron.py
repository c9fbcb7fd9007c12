"""Megatron-LM's tensor-parallel mappings as typed collectives.

Drop-in replacements for ``megatron.core.tensor_parallel.mappings``: the
same names and leading arguments, each one typed collective on the ``tp``
axis (``ep`` for :func:`all_to_all`), so a Megatron-style code base can switch
imports and get checking.  ``group=`` overrides the bound axis, as Megatron's
own ``group`` argument does.

=============================================================  ==========================================
Megatron helper                                                typed equivalent
=============================================================  ==========================================
copy_to_tensor_model_parallel_region                           convert(x, tp, src=I, dst=R)
reduce_from_tensor_model_parallel_region                       all_reduce(x, tp, src=P, dst=I)
scatter_to_tensor_model_parallel_region                        convert(x, tp, src=I, dst=S(-1))
gather_from_tensor_model_parallel_region                       all_gather(x, tp, src=S(-1), dst=I)
scatter_to_sequence_parallel_region                            convert(x, tp, src=I, dst=S(0))
gather_from_sequence_parallel_region (output grad True)       all_gather(x, tp, src=S(0), dst=R)
gather_from_sequence_parallel_region (output grad False)      all_gather(x, tp, src=S(0), dst=I)
reduce_scatter_to_sequence_parallel_region                     reduce_scatter(x, tp, src=P, dst=S(0))
all_gather_last_dim_from_tensor_parallel_region                all_gather(x, tp, src=S(-1), dst=R)
reduce_scatter_last_dim_to_tensor_parallel_region              reduce_scatter(x, tp, src=P, dst=S(-1))
all_to_all                                                     all_to_all(x, ep, src=V, dst=V)
=============================================================  ==========================================

Megatron's ``all_to_all`` splits dim 0 into one chunk per rank and
concatenates what it receives on dim 0: at runtime that is
``all_to_all(S(0), S(0))``, which local SPMD types as V -> V.  Given both
split sizes it is the uneven exchange, ``all_to_all(x, ep, src=V, dst=V,
input_split_sizes=..., output_split_sizes=...)``.
"""

from typing import Literal, Optional, Sequence, overload

import torch.distributed as dist

from spmd_stubs.axes import ep, tp
from spmd_stubs.collectives import all_gather, all_reduce, convert, reduce_scatter
from spmd_stubs.collectives import all_to_all as _all_to_all
from spmd_stubs.types import I, P, R, S, Tensor, V

__all__ = [
    "copy_to_tensor_model_parallel_region",
    "reduce_from_tensor_model_parallel_region",
    "scatter_to_tensor_model_parallel_region",
    "gather_from_tensor_model_parallel_region",
    "scatter_to_sequence_parallel_region",
    "gather_from_sequence_parallel_region",
    "reduce_scatter_to_sequence_parallel_region",
    "all_gather_last_dim_from_tensor_parallel_region",
    "reduce_scatter_last_dim_to_tensor_parallel_region",
    "all_to_all",
]

Group = Optional[dist.ProcessGroup]


def copy_to_tensor_model_parallel_region(input_: Tensor[I@tp], group: Group = None) -> Tensor[R@tp]:
    """Identity forward, all-reduce backward: ``convert(x, tp, src=I, dst=R)``."""
    return convert(input_, tp, src=I, dst=R, group=group)


def reduce_from_tensor_model_parallel_region(input_: Tensor[P@tp], group: Group = None) -> Tensor[I@tp]:
    """All-reduce forward, identity backward: ``all_reduce(x, tp, src=P, dst=I)``."""
    return all_reduce(input_, tp, src=P, dst=I, group=group)


def scatter_to_tensor_model_parallel_region(input_: Tensor[I@tp], group: Group = None) -> Tensor[S(-1)@tp]:
    """Keep this rank's last-dim slice, all-gather backward: ``convert(x, tp, src=I, dst=S(-1))``."""
    return convert(input_, tp, src=I, dst=S(-1), group=group)


def gather_from_tensor_model_parallel_region(input_: Tensor[S(-1)@tp], group: Group = None) -> Tensor[I@tp]:
    """All-gather the last dim, keep-slice backward: ``all_gather(x, tp, src=S(-1), dst=I)``."""
    return all_gather(input_, tp, src=S(-1), dst=I, group=group)


def scatter_to_sequence_parallel_region(input_: Tensor[I@tp], group: Group = None) -> Tensor[S(0)@tp]:
    """Keep this rank's sequence slice, all-gather backward: ``convert(x, tp, src=I, dst=S(0))``."""
    return convert(input_, tp, src=I, dst=S(0), group=group)


@overload
def gather_from_sequence_parallel_region(
    input_: Tensor[S(0)@tp],
    tensor_parallel_output_grad: Literal[True] = ...,
    group: Group = ...,
    output_split_sizes: Optional[Sequence[int]] = ...,
) -> Tensor[R@tp]: ...


@overload
def gather_from_sequence_parallel_region(
    input_: Tensor[S(0)@tp],
    tensor_parallel_output_grad: Literal[False],
    group: Group = ...,
    output_split_sizes: Optional[Sequence[int]] = ...,
) -> Tensor[I@tp]: ...


def gather_from_sequence_parallel_region(
    input_: Tensor[S(0)@tp],
    tensor_parallel_output_grad: bool = True,
    group: Group = None,
    output_split_sizes: Optional[Sequence[int]] = None,
) -> Tensor[R@tp] | Tensor[I@tp]:
    """All-gather the sequence dim: ``all_gather(x, tp, src=S(0), dst=R)``.

    ``tensor_parallel_output_grad=True`` (the gathered value feeds different
    per-rank work, a column-parallel linear): backward reduce-scatter, dst=R.
    ``False`` (every rank does the same work with it): backward keeps this
    rank's slice, dst=I.
    """
    dst = R if tensor_parallel_output_grad else I
    return all_gather(input_, tp, src=S(0), dst=dst, split_sizes=output_split_sizes, group=group)


def reduce_scatter_to_sequence_parallel_region(
    input_: Tensor[P@tp], group: Group = None, input_split_sizes: Optional[Sequence[int]] = None
) -> Tensor[S(0)@tp]:
    """Reduce-scatter the sequence dim, all-gather backward: ``reduce_scatter(x, tp, src=P, dst=S(0))``."""
    return reduce_scatter(input_, tp, src=P, dst=S(0), split_sizes=input_split_sizes, group=group)


def all_gather_last_dim_from_tensor_parallel_region(
    input_: Tensor[S(-1)@tp], group: Group = None
) -> Tensor[R@tp]:
    """All-gather the last dim, reduce-scatter backward: ``all_gather(x, tp, src=S(-1), dst=R)``."""
    return all_gather(input_, tp, src=S(-1), dst=R, group=group)


def reduce_scatter_last_dim_to_tensor_parallel_region(
    input_: Tensor[P@tp], group: Group = None
) -> Tensor[S(-1)@tp]:
    """Reduce-scatter the last dim, all-gather backward: ``reduce_scatter(x, tp, src=P, dst=S(-1))``."""
    return reduce_scatter(input_, tp, src=P, dst=S(-1), group=group)


def all_to_all(
    group: Group,
    input_: Tensor[V@ep],
    output_split_sizes_: Optional[Sequence[int]] = None,
    input_split_sizes: Optional[Sequence[int]] = None,
) -> Tensor[V@ep]:
    """Megatron's expert all-to-all (``group`` first, the sizes in its order): V -> V on ``ep``.

    Without sizes dim 0 is split into one chunk per rank of ``ep`` and the
    received chunks are concatenated on dim 0.  With both sizes it is the
    token dispatch: ``input_split_sizes[k]`` rows go to rank k, and
    ``output_split_sizes_[j]`` rows arrive from rank j
    (:func:`spmd_stubs.collectives.all_to_all` with split sizes).  The
    backward is the same exchange reversed.
    """
    if output_split_sizes_ is None and input_split_sizes is None:
        return _all_to_all(input_, ep, src=S(0), dst=S(0), group=group)
    return _all_to_all(input_, ep, src=V, dst=V, input_split_sizes=input_split_sizes,
                       output_split_sizes=output_split_sizes_, group=group)
