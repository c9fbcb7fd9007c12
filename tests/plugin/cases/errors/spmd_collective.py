"""spmd-collective: a collective's input does not match src, or it does not take that src/dst."""
from spmd_stubs import I, P, R, Tensor, all_gather, all_reduce
from spmd_stubs.axes import tp


def wrong(x: Tensor[R@tp], y: Tensor[P@tp]) -> None:
    a = all_reduce(x, tp, src=P, dst=I)  # E: spmd-collective all_reduce is told src=P, but the input is R@tp
    b = all_gather(y, tp, src=P, dst=R)  # E: spmd-collective all_gather(src=P, dst=R) does not exist on axis tp


def fixed(y: Tensor[P@tp]) -> None:
    a = all_reduce(y, tp, src=P, dst=I)
    reveal_type(a)  # N: Tensor[I@tp]
