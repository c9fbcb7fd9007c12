"""Odd inputs in global mode: always a diagnostic with a fix (or nothing), never an internal error."""
from typing import Any

import torch

import spmd_stubs as spmd
from spmd_stubs import R, S, Tensor, V
from spmd_stubs.axes import dp, tp

eq = "ij,jk->ik"
d = 1


@spmd.global_spmd(tp)
def odd(x: Tensor[S(0)@tp], r: Tensor[R@tp], u: torch.Tensor, a: Any) -> None:
    torch.einsum("ij,jk->ik", x)  # E: spmd-shard-mismatch cannot read the einsum equation
    torch.einsum("ij,j?->i", x, r)  # E: spmd-shard-mismatch cannot read the einsum equation
    torch.einsum(eq, x, r)  # E: spmd-shard-mismatch no shard propagation rule for this call
    reveal_type(torch.einsum("ij,jk->ik", [x, r]))  # N: Tensor[S(0)@tp]
    x.transpose(d, 0)  # E: spmd-shard-mismatch no shard propagation rule for this call
    reveal_type(x.permute(1, 0))  # N: Tensor[S(1)@tp]
    x.permute(5, 0, 1)  # E: spmd-shard-mismatch
    x.flatten(2, 1)  # E: spmd-shard-mismatch
    x.squeeze((1, 2))
    x.sum(dim=())  # E: spmd-shard-mismatch
    x.view(*a)  # E: spmd-shard-mismatch
    x.reshape(a)  # E: spmd-shard-mismatch
    torch.cat(a, dim=1)
    torch.movedim(x, (0, 1), (1,))  # E: spmd-shard-mismatch
    reveal_type(x.unsqueeze(99))  # N: Tensor[S(0)@tp]
    reveal_type(u.sum(-1))  # N: Tensor[Any]
    reveal_type(r.transpose(d, 0))  # N: Tensor[R@tp]
    f = lambda t: t.sum(-1)
    reveal_type(spmd.linear(u, u, out_partial_axes=tp))  # N: Tensor[P@tp]
    spmd.sum(x, -1, out_partial_axes=a)  # E: spmd-annotation out_partial_axes takes a mesh axis


@spmd.global_spmd()
def no_axes(x: Tensor[S(0)@tp], y: Tensor[S(1)@tp]) -> None:
    reveal_type(x + y)  # N: Tensor[V@tp]


decorated = spmd.global_spmd(tp)(lambda x: x)
