"""spmd-missing-axis (strict only): an operand does not mention an axis the other operands do."""
from spmd_stubs import R, Tensor, V, assert_type
from spmd_stubs.axes import dp, tp


def wrong(weight: Tensor[R@tp], x: Tensor[R@tp, V@dp]) -> None:
    y = x * weight  # E: spmd-missing-axis operand 1 of mul is Tensor[R@tp], which does not mention axis dp


def fixed(weight: Tensor[R@tp, R@dp], x: Tensor[R@tp, V@dp]) -> None:
    y = x * weight
    reveal_type(y)  # N: Tensor[V@dp, R@tp]
