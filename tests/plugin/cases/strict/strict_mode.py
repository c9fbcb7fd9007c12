"""strict = true: unmodelled ops on typed tensors and operands missing an axis are reported."""
import torch

from spmd_stubs import R, Tensor, V, assert_type
from spmd_stubs.axes import dp, tp


def unmodelled(x: Tensor[R@tp], t: torch.Tensor) -> None:
    y = x.logaddexp(x)  # E: spmd-unmodelled logaddexp is not modelled
    z = t.logaddexp(t)
    fixed = assert_type(x.logaddexp(x), R@tp)  # E: spmd-unmodelled


def missing_axis(a: Tensor[R@tp], b: Tensor[R@tp, V@dp]) -> None:
    a + b  # E: spmd-missing-axis does not mention axis dp
    assert_type(a, R@dp) + b
