"""torch._grouped_mm, the MoE experts' grouped GEMM: a product of its two operands (the offsets no operand)."""
import torch

from spmd_stubs import I, R, S, Tensor, V
from spmd_stubs.axes import tp


def grouped(x: Tensor[R@tp], x_whole: Tensor[I@tp], w: Tensor[S(2)@tp], offsets: Tensor[R@tp]) -> None:
    reveal_type(torch._grouped_mm(x, w, offs=offsets))  # N: Tensor[V@tp]
    torch._grouped_mm(x_whole, w, offs=offsets)  # E: spmd-invariant-mix _grouped_mm
