"""spmd-partial-affine: P added to a non-P operand (R or a Python scalar)."""
from spmd_stubs import P, R, Tensor, all_reduce, convert
from spmd_stubs.axes import tp


def wrong(partial: Tensor[P@tp], bias: Tensor[R@tp]) -> None:
    y = partial + bias  # E: spmd-partial-affine the R@tp term would be counted once per rank


def fixed(partial: Tensor[P@tp], bias: Tensor[R@tp]) -> None:
    y = all_reduce(partial, tp, src=P, dst=R) + bias
    z = partial + convert(bias, tp, src=R, dst=P)
    reveal_type(z)  # N: Tensor[P@tp]
