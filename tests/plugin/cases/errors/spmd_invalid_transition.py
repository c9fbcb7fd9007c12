"""spmd-invalid-transition: a reinterpret/convert pair that does not exist."""
from spmd_stubs import P, R, Tensor, all_reduce, reinterpret
from spmd_stubs.axes import tp


def wrong(x: Tensor[P@tp]) -> None:
    y = reinterpret(x, tp, src=P, dst=R)  # E: spmd-invalid-transition Fix: use all_reduce(x, tp, src=P, dst=R)


def fixed(x: Tensor[P@tp]) -> None:
    y = all_reduce(x, tp, src=P, dst=R)
    reveal_type(y)  # N: Tensor[R@tp]
