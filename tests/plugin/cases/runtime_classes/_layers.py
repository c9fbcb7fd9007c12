"""megatron-core's tensor-parallel layers, in a module nothing imports: specs name them, and the plugin makes the
model's module depend on it (not a case file: it is checked because megatron_build depends on it)."""
import torch.nn.functional as F
from torch import nn

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor
from spmd_stubs.axes import tp


class ColumnParallelLinear(nn.Module):
    weight: Tensor[S(0)@tp]

    def forward(self, x: Tensor[I@tp]) -> tuple[Tensor[S(-1)@tp], None]:
        return F.linear(spmd.convert(x, tp, src=I, dst=R), self.weight), None


class RowParallelLinear(nn.Module):
    weight: Tensor[S(1)@tp]

    def forward(self, x: Tensor[S(-1)@tp]) -> tuple[Tensor[I@tp], None]:
        return spmd.all_reduce(F.linear(x, self.weight), tp, src=P, dst=I), None
