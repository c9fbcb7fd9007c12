"""Elementwise ops with broadcasting: operands align from the right; the sharded ones must agree."""
import torch
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import dp, tp


@spmd.global_spmd(tp)
def accepted(x: Tensor[S(0)@tp], y: Tensor[S(0)@tp], w: Tensor[R@tp], z: Tensor[S(-1)@tp], c: Tensor[I@tp]) -> None:
    reveal_type(x + y)  # N: Tensor[S(0)@tp]
    reveal_type(x * w)  # N: Tensor[S(0)@tp]
    reveal_type(F.gelu(x) * 2.0)  # N: Tensor[S(0)@tp]
    reveal_type(torch.exp(z) - 1)  # N: Tensor[S(-1)@tp]
    reveal_type(z.float().to(torch.bfloat16))  # N: Tensor[S(-1)@tp]
    reveal_type(torch.where(w > 0, x, y))  # N: Tensor[S(0)@tp]
    reveal_type(w * w)  # N: Tensor[R@tp]
    reveal_type(c + 1)  # N: Tensor[I@tp]


@spmd.global_spmd(tp)
def rejected(x: Tensor[S(0)@tp], y: Tensor[S(1)@tp], z: Tensor[S(-1)@tp], v: Tensor[V@tp], p: Tensor[P@tp]) -> None:
    x + y  # E: spmd-shard-mismatch all_to_all(y, tp, src=S(1), dst=S(0))
    x * z  # E: spmd-shard-mismatch both counted from the front
    v * 2.0  # E: spmd-shard-mismatch annotate how its pieces make up the global tensor (S(i)@tp)
    x + p  # E: spmd-partial-varying


@spmd.global_spmd(dp, tp)
def two_axes(a: Tensor[S(0)@(dp, tp)], b: Tensor[S(0)@(dp, tp)], c: Tensor[S(0)@(tp, dp)], r: Tensor[R@dp, R@tp]) -> None:
    reveal_type(a + b)  # N: Tensor[S(0)@(dp,tp)]
    reveal_type(a * r)  # N: Tensor[S(0)@(dp,tp)]
    a + c  # E: spmd-shard-mismatch redistribute one operand to the other's partition spec


@spmd.global_spmd(tp)
def order_among_global_axes_only(a: Tensor[S(0)@(dp, tp)], b: Tensor[S(0)@tp, V@dp]) -> None:
    # dp is local here: on tp both are split over tp alone.
    reveal_type(a + b)  # N: Tensor[V@dp, S(0)@tp]


def local_mode(x: Tensor[S(0)@tp], y: Tensor[S(1)@tp], v: Tensor[V@tp]) -> None:
    # Local SPMD: S(i) is V, any mix is fine.
    reveal_type(x + y)  # N: Tensor[V@tp]
    reveal_type(x * v)  # N: Tensor[V@tp]
