"""picotron's model: ``gather_output=True`` on the LM head only, so each instance is checked in its own run.

``g`` gathers (``gather_output = true``): the head is judged there, the
hidden layer's calls are not; ``ng`` the other way round.  The class body
itself is checked in both.
"""
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
    hidden: Column
    head: Column

    def __init__(self) -> None:
        super().__init__()
        self.hidden = Column(gather_output=False)
        self.head = Column(gather_output=True)

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        h: Tensor[S(-1)@tp] = self.hidden(x)
        return self.head(x)


class GatheredTwice(Model):
    """The head's output is already whole: gathering it again is wrong (judged where the head gathers)."""

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        return spmd.all_gather(self.head(x), tp, src=S(-1), dst=I)  # E[g]: spmd-collective


class HiddenAsGathered(Model):
    """The hidden layer keeps its columns: returning them as the whole output is wrong (judged where it does
    not gather)."""

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        return self.hidden(x)  # E[ng]: return-value


class Local(nn.Module):
    """A local bound to one construction, and a construction called at once, are decided too."""

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        head = Column(gather_output=True)
        whole = head(x)
        split: Tensor[S(-1)@tp] = Column(gather_output=False)(x)
        return whole


class Rebuilt(nn.Module):
    """``self.proj`` built with both literals: undecided, judged in every run as before."""

    def __init__(self, whole: bool) -> None:
        super().__init__()
        self.proj = Column(gather_output=False)
        if whole:
            self.proj = Column(gather_output=True)

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        return self.proj(x)  # E[ng]: return-value


class Chained(Model):
    """The hidden layer's columns fed to the head: each call is judged in its own run only, so the value
    between them in none (strict says so)."""

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        return self.head(self.hidden(x))  # E[g]: spmd-configuration no configuration checks it between them


class ChainedThroughLocal(Model):
    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        h = self.hidden(x)
        return self.head(h)  # E[g]: spmd-configuration no configuration checks it between them
