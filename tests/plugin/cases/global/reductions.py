"""Reductions over dims and ops that compute along a dim (softmax): never over a sharded dim."""
import torch
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import R, S, Tensor
from spmd_stubs.axes import tp


@spmd.global_spmd(tp)
def over_other_dims(x: Tensor[S(0)@tp], y: Tensor[S(-2)@tp], r: Tensor[R@tp]) -> None:
    reveal_type(x.sum(dim=1))  # N: Tensor[S(0)@tp]
    reveal_type(x.sum(1, keepdim=True))  # N: Tensor[S(0)@tp]
    reveal_type(torch.mean(x, dim=(1, 2)))  # N: Tensor[S(0)@tp]
    reveal_type(y.amax(-1))  # N: Tensor[S(-1)@tp]
    reveal_type(y.amax(-1, keepdim=True))  # N: Tensor[S(-2)@tp]
    reveal_type(F.softmax(y, dim=-1))  # N: Tensor[S(-2)@tp]
    reveal_type(y.log_softmax(-1))  # N: Tensor[S(-2)@tp]
    reveal_type(torch.cumsum(x, dim=2))  # N: Tensor[S(0)@tp]
    reveal_type(F.layer_norm(y, [64], r, r))  # N: Tensor[S(-2)@tp]
    reveal_type(r.sum())  # N: Tensor[R@tp]


@spmd.global_spmd(tp)
def over_the_sharded_dim(x: Tensor[S(-1)@tp], z: Tensor[S(0)@tp]) -> None:
    x.sum(-1)  # E: spmd-sharded-contraction spmd.sum(..., out_partial_axes=tp)
    x.sum()  # E: spmd-sharded-contraction spmd.sum
    x.mean(dim=-1)  # E: spmd-sharded-contraction divided by the global size
    torch.amax(x, dim=-1)  # E: spmd-sharded-contraction spmd.amax(..., out_partial_axes=tp)
    x.argmax(-1)  # E: spmd-sharded-contraction all_gather(x, tp, src=S(-1), dst=R)
    F.softmax(x, dim=-1)  # E: spmd-shard-mismatch all_gather(x, tp, src=S(-1), dst=R)
    torch.cumsum(x, -1)  # E: spmd-shard-mismatch each rank sees only its piece of that dim
    F.layer_norm(x, [64])  # E: spmd-shard-mismatch
    reveal_type(spmd.sum(x, -1, out_partial_axes=tp))  # N: Tensor[P@tp]
    reveal_type(spmd.amax(x, -1, out_partial_axes=tp))  # N: Tensor[Pmax@tp]
    reveal_type(spmd.amin(x, -1, keepdim=True, out_partial_axes=tp))  # N: Tensor[Pmin@tp]


@spmd.global_spmd(tp)
def dims_that_may_alias(z: Tensor[S(0)@tp]) -> None:
    # Without the ndim, dim -1 may be the sharded dim 0 (a 1-D tensor).
    z.sum(-1)  # E: spmd-shard-mismatch both counted from the front
    F.softmax(z, dim=-1)  # E: spmd-shard-mismatch both counted from the front
    d = 1
    z.sum(d)  # E: spmd-shard-mismatch no shard propagation rule for this call


@spmd.global_spmd(tp)
def vocab_parallel_softmax(logits: Tensor[S(-1)@tp]) -> Tensor[S(-1)@tp]:
    m = spmd.all_reduce(spmd.amax(logits, -1, keepdim=True, out_partial_axes=tp), tp, src=spmd.Pmax, dst=R)
    e = torch.exp(logits - m)
    total = spmd.all_reduce(spmd.sum(e, -1, keepdim=True, out_partial_axes=tp), tp, src=spmd.P, dst=R)
    return e / total
