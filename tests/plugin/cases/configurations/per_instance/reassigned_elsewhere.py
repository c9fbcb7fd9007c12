"""``self.head`` is followed only where the module assigns ``.head`` on no other object: here a function
swaps the head of any model, so the head's flag is undecided and its calls are judged in every run."""
import torch.nn.functional as F
from torch import nn

import spmd_stubs as spmd
from spmd_stubs import I, R, S, Tensor
from spmd_stubs.axes import tp

ColumnOutput = Tensor[I[tp]] if spmd.flags.gather_output else Tensor[S[-1, tp]]


class Column(nn.Module):
    weight: Tensor[S(0)@tp]

    def __init__(self, gather_output: bool) -> None:
        super().__init__()
        self.gather_output = gather_output

    def forward(self, x: Tensor[I@tp]) -> ColumnOutput:
        out = F.linear(spmd.convert(x, tp, src=I, dst=R), self.weight)
        if self.gather_output:
            out = spmd.all_gather(out, tp, src=S(-1), dst=I)
        return out


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = Column(gather_output=True)

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        return self.head(x)  # E[ng]: return-value


def split_head(model: Model) -> None:
    model.head = Column(gather_output=False)


class Projected(nn.Module):
    proj: Column

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        return self.proj(x)  # E[ng]: return-value


class WholeProjection(Projected):
    def __init__(self) -> None:
        super().__init__()
        self.proj = Column(gather_output=True)


class SplitProjection(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = Column(gather_output=False)


class Mixed(WholeProjection, SplitProjection):
    """``Projected.forward`` may run on a ``Mixed``, whose ``proj`` a class mixed in beside it also sets: the
    flag of ``self.proj`` there is undecided."""
