"""spmd-unmodelled (strict only): an op the checker does not model got a typed tensor; its result is unknown."""
import torch

from spmd_stubs import R, Tensor, assert_type
from spmd_stubs.axes import tp


def wrong(x: Tensor[R@tp], t: torch.Tensor) -> None:
    y = x.logaddexp(x)  # E: spmd-unmodelled logaddexp is not modelled by the SPMD checker
    z = t.logaddexp(t)  # untyped operands: nothing to report
    n = x.size(0) + x.numel() + x.dim()  # no tensor results: nothing to type


def fixed(x: Tensor[R@tp]) -> None:
    y = assert_type(torch.exp(x) + torch.exp(x), R@tp)
    reveal_type(y)  # N: Tensor[R@tp]
