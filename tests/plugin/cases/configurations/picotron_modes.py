"""A layer that keeps its mode under another name: ``self.mode = config.tp_mode`` (picotron, megatron).

``sp`` sets ``tp_mode = REDUCE_SCATTER`` and ``sequence_parallel = true``,
``no_sp`` ``tp_mode = ALL_REDUCE`` and ``sequence_parallel = false``
(``_extra.ini``).  ``self.mode`` is ``tp_mode`` wherever the module assigns
it only that, and so is ``self.sp``; a local that holds it, and a parameter
every call passes it to, are too.
"""
from dataclasses import dataclass
from enum import Enum, auto

import torch.nn.functional as F
from torch import nn

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor
from spmd_stubs.axes import tp


class TensorParallelLinearMode(Enum):
    ALL_REDUCE = auto()
    REDUCE_SCATTER = auto()


@dataclass
class ParallelConfig:
    tp_mode: TensorParallelLinearMode
    sequence_parallel: bool


Sharded = Tensor[S[0, tp]] if spmd.flags.tp_mode is TensorParallelLinearMode.REDUCE_SCATTER else Tensor[I[tp]]


class RowParallelLinear(nn.Module):
    weight: Tensor[S(1)@tp]

    def __init__(self, config: ParallelConfig) -> None:
        super().__init__()
        self.mode = config.tp_mode

    def forward(self, x: Tensor[S(-1)@tp]) -> Sharded:
        out = spmd.reinterpret(F.linear(x, self.weight), tp, src=S(-1), dst=P)
        if self.mode == TensorParallelLinearMode.ALL_REDUCE:
            out = spmd.all_reduce(out, tp, src=P, dst=I)
        else:
            out = spmd.reduce_scatter(out, tp, src=P, dst=S(0))
        return out


class RowParallelLinearSwapped(RowParallelLinear):
    """A subclass reads the mode its base's ``__init__`` stored: the swapped branches are each one's bug."""

    def forward(self, x: Tensor[S(-1)@tp]) -> Sharded:
        out = spmd.reinterpret(F.linear(x, self.weight), tp, src=S(-1), dst=P)
        if self.mode == TensorParallelLinearMode.ALL_REDUCE:
            return spmd.reduce_scatter(out, tp, src=P, dst=S(0))  # E[no_sp]: return-value
        return spmd.all_reduce(out, tp, src=P, dst=I)  # E[sp]: return-value


class ColumnParallelLinear(nn.Module):
    weight: Tensor[S(0)@tp]

    def __init__(self, config: ParallelConfig) -> None:
        super().__init__()
        self.mode = config.tp_mode

    def forward(self, x: Sharded) -> Tensor[S(-1)@tp]:
        mode = self.mode  # a local that holds the flag
        return _column_input(x, self.weight, mode)

    def backward_input(self, x: Sharded) -> Tensor[S(-1)@tp]:
        return _column_input(x, self.weight, mode=self.mode)


def _column_input(x: Sharded, weight: Tensor[S(0)@tp], mode: TensorParallelLinearMode) -> Tensor[S(-1)@tp]:
    """Every call passes the mode (positionally or by keyword): ``mode`` is ``tp_mode`` here."""
    if mode is TensorParallelLinearMode.REDUCE_SCATTER:
        total = spmd.all_gather(x, tp, src=S(0), dst=R)
    else:
        total = spmd.convert(x, tp, src=I, dst=R)
    return F.linear(total, weight)


class LayerNorm(nn.Module):
    """megatron's norm, its flag under a short name: ``self.sp = config.sequence_parallel``."""

    weight: Tensor[I@tp]

    def __init__(self, config: ParallelConfig) -> None:
        super().__init__()
        self.sp = config.sequence_parallel

    def forward(self, x: Sharded) -> Sharded:
        weight = spmd.convert(self.weight, tp, src=I, dst=R) if self.sp else self.weight
        return F.layer_norm(x, x.shape[-1:], weight)


class LayerNormWeightBug(LayerNorm):
    """The weight's convert written for the wrong setting: a bug in each configuration, each reported in its own."""

    def forward(self, x: Sharded) -> Sharded:
        weight = self.weight if self.sp else spmd.convert(self.weight, tp, src=I, dst=R)
        return F.layer_norm(x, x.shape[-1:], weight)  # E[sp]: spmd-invariant-mix (V@tp, I@tp) # E[no_sp]: spmd-invariant-mix (I@tp, R@tp)
