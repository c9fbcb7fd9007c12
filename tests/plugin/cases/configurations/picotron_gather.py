"""picotron's ColumnParallelLinear: ``gather_output`` decides the output's layout.

``no_sp`` sets ``gather_output = true`` (the output all-gathered, the same on
every rank: I@tp), ``sp`` false (each rank keeps its columns: S(-1)@tp).
"""
import torch.nn.functional as F
from torch import nn

import spmd_stubs as spmd
from spmd_stubs import I, R, S, Tensor
from spmd_stubs.axes import tp

ColumnOutput = Tensor[I[tp]] if spmd.flags.gather_output else Tensor[S[-1, tp]]


class ColumnParallelLinear(nn.Module):
    weight: Tensor[S(0)@tp]

    def __init__(self, gather_output: bool) -> None:
        super().__init__()
        self.gather_output = gather_output

    def forward(self, x: Tensor[I@tp]) -> ColumnOutput:
        input_parallel = spmd.convert(x, tp, src=I, dst=R)  # CopyToModelParallelRegion
        output = F.linear(input_parallel, self.weight)
        if self.gather_output:
            output = spmd.all_gather(output, tp, src=S(-1), dst=I)  # GatherFromModelParallelRegion
        return output


class GatherAsReplicate(ColumnParallelLinear):
    """The gather's backward written as a reduce-scatter (dst=R): the gathered output is not I."""

    def forward(self, x: Tensor[I@tp]) -> ColumnOutput:
        output = F.linear(spmd.convert(x, tp, src=I, dst=R), self.weight)
        if self.gather_output:
            output = spmd.all_gather(output, tp, src=S(-1), dst=R)
        return output  # E[no_sp]: return-value
