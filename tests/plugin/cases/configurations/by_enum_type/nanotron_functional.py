"""nanotron's functional.py (and enum.py): the layout chosen by ``tp_mode is TensorParallelLinearMode.X``.

``tp_mode`` is declared by its enum type (``_extra.ini``: ``tp_mode =
TensorParallelLinearMode.ALL_REDUCE`` in ``all_reduce``, ``...REDUCE_SCATTER``
in ``reduce_scatter``), so every comparison with one of the class's members
is decided, whatever the compared value is called.
"""
from enum import Enum, auto

import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor
from spmd_stubs.axes import tp


# TODO @thomasw21: python 3.11 introduces `StrEnum` which would've been great to use.
class TensorParallelLinearMode(Enum):
    ALL_REDUCE = auto()
    REDUCE_SCATTER = auto()


# The activations between layers: split on the sequence dim with REDUCE_SCATTER, whole with ALL_REDUCE.
Sharded = Tensor[S[0, tp]] if spmd.flags.tp_mode is TensorParallelLinearMode.REDUCE_SCATTER else Tensor[I[tp]]


def column_linear(input: Sharded, weight: Tensor[S(0)@tp], tp_mode: TensorParallelLinearMode) -> Tensor[S(-1)@tp]:
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        input = spmd.convert(input, tp, src=I, dst=R)  # differentiable_identity
    elif tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:
        input = spmd.all_gather(input, tp, src=S(0), dst=R)  # differentiable_all_gather
    else:
        raise ValueError(f"Got unexpected mode: {tp_mode}.")
    return F.linear(input, weight)


def row_linear(input: Tensor[S(-1)@tp], weight: Tensor[S(1)@tp], tp_mode: TensorParallelLinearMode) -> Sharded:
    out = spmd.reinterpret(F.linear(input, weight), tp, src=S(-1), dst=P)
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        out = spmd.all_reduce(out, tp, src=P, dst=I)  # differentiable_all_reduce_sum
    elif tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:
        out = spmd.reduce_scatter(out, tp, src=P, dst=S(0))  # differentiable_reduce_scatter_sum
    else:
        raise ValueError(f"Got unexpected mode: {tp_mode}.")
    return out


def row_linear_by_type(input: Tensor[S(-1)@tp], weight: Tensor[S(1)@tp], mode: TensorParallelLinearMode) -> Sharded:
    """A value of any name compared with a member: decided by the member's class."""
    out = spmd.reinterpret(F.linear(input, weight), tp, src=S(-1), dst=P)
    if mode is not TensorParallelLinearMode.REDUCE_SCATTER:
        return spmd.all_reduce(out, tp, src=P, dst=I)
    return spmd.reduce_scatter(out, tp, src=P, dst=S(0))


def row_linear_swapped(input: Tensor[S(-1)@tp], weight: Tensor[S(1)@tp], mode: TensorParallelLinearMode) -> Sharded:
    """The two modes' collectives swapped: wrong in each configuration, each reported in its own."""
    out = spmd.reinterpret(F.linear(input, weight), tp, src=S(-1), dst=P)
    if mode == TensorParallelLinearMode.REDUCE_SCATTER:
        return spmd.all_reduce(out, tp, src=P, dst=I)  # E[reduce_scatter]: return-value
    return spmd.reduce_scatter(out, tp, src=P, dst=S(0))  # E[all_reduce]: return-value


def reveal(x: Sharded) -> None:
    reveal_type(x)  # N[all_reduce]: Tensor[I@tp] # N[reduce_scatter]: Tensor[S(0)@tp]
