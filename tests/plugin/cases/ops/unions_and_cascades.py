"""A union operand takes one member wherever it occurs; after an error only the failing axis is unknown."""
import torch

from spmd_stubs import I, P, R, Tensor, V
from spmd_stubs.axes import dp, tp


def one_value_one_member(c: bool, a: Tensor[R@tp], b: Tensor[I@tp], d: Tensor[R@tp]) -> None:
    y = a if c else b
    reveal_type(torch.mul(y, y))  # N: Tensor[R@tp] | torch._tensor.Tensor[I@tp]
    reveal_type(y.mul(y))  # N: Tensor[R@tp] | torch._tensor.Tensor[I@tp]
    torch.mul(y, d)  # E: spmd-invariant-mix


def one_bug_one_error(a: Tensor[I@tp, P@dp], b: Tensor[V@tp, P@dp], e: Tensor[I@tp, V@dp]) -> None:
    c = a.add(b)  # E: spmd-invariant-mix
    reveal_type(c)  # N: Tensor[P@dp]
    c.sum().backward()  # the dp axis is still checked: P is a valid loss there
    g = torch.add(e, e.detach() * 2.0)
    g.sum().backward()  # E: spmd-backward
