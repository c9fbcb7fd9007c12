"""spmd-untyped-collective: a raw torch.distributed collective on a typed tensor."""
import torch.distributed as dist

from spmd_stubs import P, R, Tensor, all_reduce
from spmd_stubs.axes import tp


def wrong(x: Tensor[P@tp]) -> None:
    dist.all_reduce(x)  # E: spmd-untyped-collective use the typed spmd_stubs.all_reduce(x, tp, src=P, dst=R or I)


def fixed(x: Tensor[P@tp]) -> None:
    y = all_reduce(x, tp, src=P, dst=R)
    reveal_type(y)  # N: Tensor[R@tp]
