"""picotron as written: the model builds plain layers and ``apply_tensor_parallel`` swaps them afterwards,
passing ``gather_output=True`` to the LM head's ColumnParallelLinear only, through an arguments dict.

``[spmd_mypy] modules`` declares each attribute's run-time class; the head's entry states the literal
(``ColumnParallelLinear(gather_output=True)``), the others take its default, so each instance is checked in the
runs that agree with it, as if the code had constructed them.
"""
import torch.nn.functional as F
from torch import nn

import spmd_stubs as spmd
from spmd_stubs import I, R, S, Tensor
from spmd_stubs.axes import tp

from plugin.cases.configurations.per_instance.picotron_head import ColumnOutput


class ColumnParallelLinear(nn.Module):
    weight: Tensor[S(0)@tp]

    def __init__(self, gather_output: bool = False) -> None:
        super().__init__()
        self.gather_output = gather_output

    def forward(self, x: Tensor[I@tp]) -> ColumnOutput:
        out = F.linear(spmd.convert(x, tp, src=I, dst=R), self.weight)
        if self.gather_output:
            out = spmd.all_gather(out, tp, src=S(-1), dst=I)
        return out


class Llama(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up_proj = nn.Linear(8, 8)
        self.final_proj = nn.Linear(8, 8)

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        h: Tensor[S(-1)@tp] = self.up_proj(x)
        return self.final_proj(x)


class GatheredTwice(Llama):
    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        return spmd.all_gather(self.final_proj(x), tp, src=S(-1), dst=I)  # E[g]: spmd-collective


class HiddenAsGathered(Llama):
    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        return self.up_proj(x)  # E[ng]: return-value
