"""spmd-invariant-mix: I combined with R, V or P."""
import torch.nn.functional as F

from spmd_stubs import I, R, S, Tensor, convert
from spmd_stubs.axes import tp


def wrong(x: Tensor[I@tp], weight: Tensor[S(0)@tp]) -> None:
    h = F.linear(x, weight)  # E: spmd-invariant-mix linear mixes Invariant with Varying on axis tp


def fixed(x: Tensor[I@tp], weight: Tensor[S(0)@tp]) -> None:
    h = F.linear(convert(x, tp, src=I, dst=R), weight)
    reveal_type(h)  # N: Tensor[V@tp]
