"""nanotron's nn.py: each layer keeps the mode as ``self.mode = mode``, a parameter set by callers elsewhere.

No call of these classes is in this module, so ``self.mode`` is not
followed to ``tp_mode``; the comparisons are decided by the member's class
(``_extra.ini`` declares ``tp_mode`` by its enum type), written as nanotron
writes it or under another name for the class (an import's ``as`` name is
read the same way: tests/configurations/test_following.py).  The enum and
the functions nanotron imports from enum.py and functional.py are written
here (nanotron_functional.py has them as nanotron does).
"""
from enum import Enum, auto
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor
from spmd_stubs.axes import tp


class TensorParallelLinearMode(Enum):
    ALL_REDUCE = auto()
    REDUCE_SCATTER = auto()


Mode = TensorParallelLinearMode
Sharded = Tensor[S[0, tp]] if spmd.flags.tp_mode is Mode.REDUCE_SCATTER else Tensor[I[tp]]


def column_linear(input: Sharded, weight: Tensor[S(0)@tp], tp_mode: TensorParallelLinearMode) -> Tensor[S(-1)@tp]:
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        return F.linear(spmd.convert(input, tp, src=I, dst=R), weight)
    return F.linear(spmd.all_gather(input, tp, src=S(0), dst=R), weight)


def row_linear(input: Tensor[S(-1)@tp], weight: Tensor[S(1)@tp], tp_mode: TensorParallelLinearMode) -> Sharded:
    out = spmd.reinterpret(F.linear(input, weight), tp, src=S(-1), dst=P)
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        return spmd.all_reduce(out, tp, src=P, dst=I)
    return spmd.reduce_scatter(out, tp, src=P, dst=S(0))


class TensorParallelColumnLinear(nn.Module):
    weight: Tensor[S(0)@tp]

    def __init__(self, in_features: int, out_features: int, mode: TensorParallelLinearMode,
                 async_communication: bool = False) -> None:
        super().__init__()
        self.mode = mode
        self.async_communication = async_communication

    def forward(self, x: Sharded) -> Tensor[S(-1)@tp]:
        return column_linear(x, self.weight, tp_mode=self.mode)


class TensorParallelRowLinear(nn.Module):
    weight: Tensor[S(1)@tp]

    def __init__(self, in_features: int, out_features: int, mode: TensorParallelLinearMode,
                 async_communication: bool = False) -> None:
        super().__init__()
        self.mode = mode
        self.async_communication = async_communication
        if self.mode is TensorParallelLinearMode.ALL_REDUCE and self.async_communication:
            raise ValueError("async_communication is not supported for ALL_REDUCE mode")

    def forward(self, x: Tensor[S(-1)@tp]) -> Sharded:
        return row_linear(x, self.weight, tp_mode=self.mode)


class TensorParallelEmbedding(nn.Module):
    weight: Tensor[S(0)@tp]

    def __init__(self, num_embeddings: int, embedding_dim: int, mode: TensorParallelLinearMode) -> None:
        super().__init__()
        self.mode = mode
        self.reduce_op: Optional[str] = None if self.mode is Mode.ALL_REDUCE else "sum"

    def forward(self, input_ids: Tensor[I@tp]) -> Sharded:
        out = spmd.reinterpret(F.embedding(input_ids, self.weight), tp, src=S(-1), dst=P)
        if self.mode is TensorParallelLinearMode.ALL_REDUCE:
            out = spmd.all_reduce(out, tp, src=P, dst=I)  # differentiable_all_reduce_sum
        elif self.mode is TensorParallelLinearMode.REDUCE_SCATTER:
            out = spmd.reduce_scatter(out, tp, src=P, dst=S(0))  # differentiable_reduce_scatter_sum
        else:
            raise ValueError(f"Got unexpected mode: {self.mode}.")
        return out


class EmbeddingModesSwapped(TensorParallelEmbedding):
    """Each mode's collective in the other's branch (the class under another name): wrong in each configuration."""

    def forward(self, input_ids: Tensor[I@tp]) -> Sharded:
        out = spmd.reinterpret(F.embedding(input_ids, self.weight), tp, src=S(-1), dst=P)
        if self.mode is Mode.REDUCE_SCATTER:
            return spmd.all_reduce(out, tp, src=P, dst=I)  # E[reduce_scatter]: return-value
        return spmd.reduce_scatter(out, tp, src=P, dst=S(0))  # E[all_reduce]: return-value


def mode_of(layer: TensorParallelEmbedding) -> torch.dtype:
    """A comparison of two values (no member) is no flag's: undecided, both branches checked."""
    if layer.mode is layer.mode:
        return torch.float32
    return torch.bfloat16
