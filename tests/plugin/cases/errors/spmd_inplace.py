"""spmd-inplace: an in-place op or out= would change the written tensor's type."""
from spmd_stubs import R, Tensor, V
from spmd_stubs.axes import tp


def wrong(acc: Tensor[R@tp], x: Tensor[V@tp]) -> None:
    acc.add_(x)  # E: spmd-inplace would change its target from R@tp to V@tp


def fixed(acc: Tensor[R@tp], x: Tensor[V@tp]) -> None:
    total = acc + x
    reveal_type(total)  # N: Tensor[V@tp]
