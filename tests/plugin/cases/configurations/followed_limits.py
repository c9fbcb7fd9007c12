"""Where an assignment is not followed: a parameter whose calls disagree, an attribute set to something else.

Then both branches are checked in each configuration, as without
configurations, and each configuration reports the branch written for the
other.  The fix is to let the module say which flag it is: name the
parameter after the flag (``tp_mode``), or compare with a member of a class
the flag is declared by (``tp_mode = TensorParallelLinearMode.ALL_REDUCE``
in the configurations: tests/plugin/cases/configurations/by_enum_type).
"""
from enum import Enum, auto

import torch.nn.functional as F
from torch import nn

import spmd_stubs as spmd
from spmd_stubs import I, R, S, Tensor
from spmd_stubs.axes import tp


class TensorParallelLinearMode(Enum):
    ALL_REDUCE = auto()
    REDUCE_SCATTER = auto()


Sharded = Tensor[S[0, tp]] if spmd.flags.tp_mode is TensorParallelLinearMode.REDUCE_SCATTER else Tensor[I[tp]]


def gathered(x: Sharded, mode: TensorParallelLinearMode) -> Tensor[R@tp]:
    if mode is TensorParallelLinearMode.REDUCE_SCATTER:
        return spmd.all_gather(x, tp, src=S(0), dst=R)  # E[no_sp]: spmd-collective
    return spmd.convert(x, tp, src=I, dst=R)  # E[sp]: spmd-collective


def gathered_by_name(x: Sharded, tp_mode: TensorParallelLinearMode) -> Tensor[R@tp]:
    """The fix: the parameter named after the flag is the flag, whatever its calls pass."""
    if tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:
        return spmd.all_gather(x, tp, src=S(0), dst=R)
    return spmd.convert(x, tp, src=I, dst=R)


class Layer(nn.Module):
    weight: Tensor[S(0)@tp]

    def __init__(self, tp_mode: TensorParallelLinearMode) -> None:
        super().__init__()
        self.mode = tp_mode

    def forward(self, x: Sharded) -> Tensor[S(-1)@tp]:
        return F.linear(gathered(x, self.mode), self.weight)

    def replicated(self, x: Sharded) -> Tensor[R@tp]:
        return gathered(x, TensorParallelLinearMode.ALL_REDUCE)  # a call that passes a constant


class Reconfigured(nn.Module):
    """``self.mode`` is the flag in ``__init__`` and something else after ``reset``: not followed."""

    def __init__(self, tp_mode: TensorParallelLinearMode) -> None:
        super().__init__()
        self.mode = tp_mode

    def reset(self) -> None:
        self.mode = TensorParallelLinearMode.ALL_REDUCE

    def forward(self, x: Sharded) -> Tensor[R@tp]:
        if self.mode is TensorParallelLinearMode.REDUCE_SCATTER:
            return spmd.all_gather(x, tp, src=S(0), dst=R)  # E[no_sp]: spmd-collective
        return spmd.convert(x, tp, src=I, dst=R)  # E[sp]: spmd-collective
