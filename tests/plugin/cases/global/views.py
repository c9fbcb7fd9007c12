"""Transposes, permutes, squeeze/unsqueeze, flatten, views and reshapes, cat and stack."""
import torch

import spmd_stubs as spmd
from spmd_stubs import R, S, Tensor
from spmd_stubs.axes import tp


@spmd.global_spmd(tp)
def moving_dims(x: Tensor[S(0)@tp], y: Tensor[S(-1)@tp], w: Tensor[S(0)@tp]) -> None:
    reveal_type(x.transpose(0, 1))  # N: Tensor[S(1)@tp]
    reveal_type(y.transpose(-2, -1))  # N: Tensor[S(-2)@tp]
    reveal_type(w.T)  # N: Tensor[S(-1)@tp]
    reveal_type(w.t())  # N: Tensor[S(-1)@tp]
    reveal_type(y.mT)  # N: Tensor[S(-2)@tp]
    reveal_type(x.permute(1, 0, 2))  # N: Tensor[S(1)@tp]
    reveal_type(x.permute((2, 0, 1)))  # N: Tensor[S(1)@tp]
    reveal_type(torch.movedim(x, 0, -1))  # N: Tensor[S(-1)@tp]
    reveal_type(x.unsqueeze(0))  # N: Tensor[S(1)@tp]
    reveal_type(y.unsqueeze(-1))  # N: Tensor[S(-2)@tp]
    reveal_type(y.unsqueeze(0))  # N: Tensor[S(-1)@tp]
    reveal_type(x.squeeze(1))  # N: Tensor[S(0)@tp]
    reveal_type(x.flatten(1))  # N: Tensor[S(0)@tp]
    reveal_type(x.flatten(0, 1))  # N: Tensor[S(0)@tp]


@spmd.global_spmd(tp)
def moving_dims_rejected(x: Tensor[S(0)@tp], y: Tensor[S(-1)@tp]) -> None:
    y.transpose(0, 1)  # E: spmd-shard-mismatch both counted from the front
    x.squeeze()  # E: spmd-shard-mismatch squeeze(dim)
    x.squeeze(0)  # E: spmd-shard-mismatch all_gather(x, tp, src=S(0), dst=R)
    y.flatten(-2, -1)  # E: spmd-shard-mismatch merges or removes the sharded dim -1


@spmd.global_spmd(tp)
def views(x: Tensor[S(0)@tp], y: Tensor[S(-1)@tp]) -> None:
    reveal_type(x.view(x.shape[0], x.shape[1], 4, -1))  # N: Tensor[S(0)@tp]
    reveal_type(x.reshape(x.size(0), -1))  # N: Tensor[S(0)@tp]
    reveal_type(x.view(*x.shape[:2], 8, 8))  # N: Tensor[S(0)@tp]
    reveal_type(y.view(-1, y.shape[-1]))  # N: Tensor[S(-1)@tp]
    reveal_type(torch.reshape(y, (4, -1, y.shape[-1])))  # N: Tensor[S(-1)@tp]
    reveal_type(x.view(-1, x.shape[-1]))  # N: Tensor[S(0)@tp]
    reveal_type(x.view(-1))  # N: Tensor[S(0)@tp]
    x.view(4, -1)  # E: spmd-shard-mismatch write the kept dims as x.shape[...]
    y.view(y.shape[0], -1)  # E: spmd-shard-mismatch cannot show that the new shape keeps the sharded dim -1
    x.reshape(4, x.shape[1], -1)  # E: spmd-shard-mismatch


@spmd.global_spmd(tp)
def joining(a: Tensor[S(0)@tp], b: Tensor[S(0)@tp], r: Tensor[R@tp]) -> None:
    reveal_type(torch.cat([a, b], dim=1))  # N: Tensor[S(0)@tp]
    reveal_type(torch.stack((a, b)))  # N: Tensor[S(1)@tp]
    reveal_type(torch.cat([r, r], dim=0))  # N: Tensor[R@tp]
    torch.cat([a, b])  # E: spmd-shard-mismatch joins along the sharded dim 0
    torch.cat([a, r], dim=1)  # E: spmd-shard-mismatch convert(y, tp, src=R, dst=S(0))
    a.chunk(2, dim=0)  # E: spmd-shard-mismatch
    reveal_type(a.chunk(2, dim=1))  # N: tuple[torch._tensor.Tensor[S(0)@tp], ...]


@spmd.global_spmd(tp)
def no_rule(x: Tensor[S(0)@tp], r: Tensor[R@tp]) -> None:
    x[0]  # E: spmd-shard-mismatch has no shard propagation rule
    reveal_type(r[0])  # N: Tensor[R@tp]
    x.repeat(2, 1)  # E: spmd-shard-mismatch local_map(tp)
