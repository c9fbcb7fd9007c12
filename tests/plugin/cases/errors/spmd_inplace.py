"""spmd-inplace: an in-place op, out= or a write through indexing (x[i] = y) would change the written tensor's type."""
from spmd_stubs import P, R, Tensor, V, all_reduce
from spmd_stubs.axes import tp


def wrong(acc: Tensor[R@tp], x: Tensor[V@tp], part: Tensor[P@tp]) -> None:
    acc.add_(x)  # E: spmd-inplace would change its target from R@tp to V@tp
    acc[0] = part  # E: spmd-inplace writes y of type P@tp into x of type R@tp on axis tp


def fixed(acc: Tensor[R@tp], x: Tensor[V@tp], part: Tensor[P@tp]) -> None:
    total = acc + x
    reveal_type(total)  # N: Tensor[V@tp]
    acc[0] = all_reduce(part, tp, src=P, dst=R)
