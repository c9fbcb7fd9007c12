"""nanotron's tensor-parallel linears: the layout chosen by comparing ``tp_mode`` with an enum member.

``sp`` sets ``tp_mode = REDUCE_SCATTER``, ``no_sp`` ``tp_mode = ALL_REDUCE``
(``_extra.ini``); the layer keeps the mode as ``self.mode`` and passes it as
``tp_mode=``, the name the functions test.
"""
from enum import Enum, auto

import torch.nn.functional as F
from torch import nn

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor
from spmd_stubs.axes import tp


class TensorParallelLinearMode(Enum):
    ALL_REDUCE = auto()
    REDUCE_SCATTER = auto()


Sharded = Tensor[S[0, tp]] if spmd.flags.tp_mode is TensorParallelLinearMode.REDUCE_SCATTER else Tensor[I[tp]]


def column_linear(input: Sharded, weight: Tensor[S(0)@tp], tp_mode: TensorParallelLinearMode) -> Tensor[S(-1)@tp]:
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        input = spmd.convert(input, tp, src=I, dst=R)  # differentiable_identity
        return F.linear(input, weight)
    if tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:
        gathered = spmd.all_gather(input, tp, src=S(0), dst=R)  # the all-gather inside the Function
        return F.linear(gathered, weight)
    raise ValueError(f"Can't recognize tp_mode {tp_mode}")


def row_linear(input: Tensor[S(-1)@tp], weight: Tensor[S(1)@tp], tp_mode: TensorParallelLinearMode) -> Sharded:
    out = spmd.reinterpret(F.linear(input, weight), tp, src=S(-1), dst=P)
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        return spmd.all_reduce(out, tp, src=P, dst=I)  # differentiable_all_reduce_sum
    elif tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:
        return spmd.reduce_scatter(out, tp, src=P, dst=S(0))  # differentiable_reduce_scatter_sum
    else:
        raise ValueError(f"Can't recognize tp_mode {tp_mode}")


def row_linear_swapped(input: Tensor[S(-1)@tp], weight: Tensor[S(1)@tp], tp_mode: TensorParallelLinearMode) -> Sharded:
    """The two modes' collectives swapped: wrong in each configuration, each reported in its own."""
    out = spmd.reinterpret(F.linear(input, weight), tp, src=S(-1), dst=P)
    if tp_mode == TensorParallelLinearMode.REDUCE_SCATTER:
        return spmd.all_reduce(out, tp, src=P, dst=I)  # E[sp]: return-value
    return spmd.reduce_scatter(out, tp, src=P, dst=S(0))  # E[no_sp]: return-value


class TensorParallelColumnLinear(nn.Module):
    weight: Tensor[S(0)@tp]

    def __init__(self, mode: TensorParallelLinearMode) -> None:
        super().__init__()
        self.mode = mode

    def forward(self, x: Sharded) -> Tensor[S(-1)@tp]:
        return column_linear(x, self.weight, tp_mode=self.mode)
