"""nanotron's mode given per instance as an enum member, by keyword or by position.

``g`` sets ``tp_mode = REDUCE_SCATTER`` (the output split on the sequence
dim), ``ng`` ``ALL_REDUCE`` (whole on every rank).
"""
from enum import Enum, auto

import torch.nn.functional as F
from torch import nn

import spmd_stubs as spmd
from spmd_stubs import I, P, S, Tensor
from spmd_stubs.axes import tp


class TensorParallelLinearMode(Enum):
    ALL_REDUCE = auto()
    REDUCE_SCATTER = auto()


Sharded = Tensor[S[0, tp]] if spmd.flags.tp_mode is TensorParallelLinearMode.REDUCE_SCATTER else Tensor[I[tp]]


class Embedding(nn.Module):
    weight: Tensor[S(0)@tp]

    def __init__(self, tp_mode: TensorParallelLinearMode) -> None:
        super().__init__()
        self.tp_mode = tp_mode

    def forward(self, input_ids: Tensor[I@tp]) -> Sharded:
        out = spmd.reinterpret(F.embedding(input_ids, self.weight), tp, src=S(-1), dst=P)
        if self.tp_mode is TensorParallelLinearMode.ALL_REDUCE:
            return spmd.all_reduce(out, tp, src=P, dst=I)
        return spmd.reduce_scatter(out, tp, src=P, dst=S(0))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.whole = Embedding(TensorParallelLinearMode.ALL_REDUCE)
        self.split = Embedding(tp_mode=TensorParallelLinearMode.REDUCE_SCATTER)

    def forward(self, input_ids: Tensor[I@tp]) -> Tensor[I@tp]:
        parts: Tensor[S(0)@tp] = self.split(input_ids)
        return self.whole(input_ids)


class SplitAsWhole(Model):
    def forward(self, input_ids: Tensor[I@tp]) -> Tensor[I@tp]:
        return self.split(input_ids)  # E[g]: return-value
