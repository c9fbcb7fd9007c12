"""assert_type refines unknown tensors and checks known ones; raw torch.distributed loses track."""
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from spmd_stubs import I, P, R, S, Tensor, V, assert_type
from spmd_stubs.axes import dp, tp


def refine(batch: torch.Tensor, x: Tensor[V@dp]) -> None:
    reveal_type(assert_type(batch, V@dp, I@tp))  # N: Tensor[V@dp, I@tp]
    reveal_type(assert_type(x, R@tp))  # N: Tensor[V@dp, R@tp]
    reveal_type(assert_type(x, S(0)@dp))  # N: Tensor[S(0)@dp]


def contradict(x: Tensor[V@dp, P@tp]) -> None:
    assert_type(x, R@dp)  # E: spmd-assert assert_type says R@dp but the value is V@dp
    assert_type(x, P@tp, I@tp)  # E: spmd-annotation axis tp is given twice


def raw(x: Tensor[P@tp], t: torch.Tensor, out: torch.Tensor) -> None:
    dist.all_reduce(x)  # E: spmd-untyped-collective spmd_stubs.all_reduce(x, tp, src=P
    dist.all_gather_into_tensor(out, x)  # E: spmd-untyped-collective spmd_stubs.all_gather
    dist.all_gather_single(out, x)  # E: spmd-untyped-collective spmd_stubs.all_gather
    dist.reduce_scatter_single(out, x)  # E: spmd-untyped-collective spmd_stubs.reduce_scatter
    funcol.all_reduce(x, "sum", [0, 1])  # E: spmd-untyped-collective
    dist.all_reduce(t)
