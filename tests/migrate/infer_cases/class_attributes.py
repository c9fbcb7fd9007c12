"""A layer that declares its tensor attributes at class level: an inferred one is declared the same way."""

from torch import nn

from spmd_stubs import S, Tensor
from spmd_stubs.axes import tp


class ColumnShard(nn.Module):
    """This rank's rows of a column-parallel weight and bias."""

    bias: Tensor[S(0)@tp]

    def __init__(self, weight: Tensor[S(0)@tp], bias: Tensor[S(0)@tp]) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight)
        self.bias = nn.Parameter(bias)
