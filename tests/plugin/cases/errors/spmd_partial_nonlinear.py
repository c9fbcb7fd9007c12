"""spmd-partial-nonlinear: P into a nonlinear op (activations, exp, softmax, a P index)."""
import torch.nn.functional as F

from spmd_stubs import P, R, Tensor, all_reduce
from spmd_stubs.axes import tp


def wrong(partial: Tensor[P@tp]) -> None:
    y = F.gelu(partial)  # E: spmd-partial-nonlinear gelu is nonlinear but gets a Partial operand on axis tp


def fixed(partial: Tensor[P@tp]) -> None:
    y = F.gelu(all_reduce(partial, tp, src=P, dst=R))
    reveal_type(y)  # N: Tensor[R@tp]
