"""The column -> row MLP, in local SPMD and in global SPMD on tp, side by side."""
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import P, R, S, Tensor, V
from spmd_stubs.axes import dp, tp


def mlp_local(x: Tensor[R@tp], w1: Tensor[V@tp], w2: Tensor[V@tp]) -> Tensor[R@tp]:
    h = F.gelu(F.linear(x, w1))
    reveal_type(h)  # N: Tensor[V@tp]
    y = spmd.reinterpret(F.linear(h, w2), tp, src=V, dst=P)
    return spmd.all_reduce(y, tp, src=P, dst=R)


@spmd.global_spmd(tp)
def mlp_global(x: Tensor[R@tp], w1: Tensor[S(0)@tp], w2: Tensor[S(1)@tp]) -> Tensor[R@tp]:
    h = F.gelu(F.linear(x, w1))
    reveal_type(h)  # N: Tensor[S(-1)@tp]
    y = spmd.linear(h, w2, out_partial_axes=tp)
    reveal_type(y)  # N: Tensor[P@tp]
    return spmd.all_reduce(y, tp, src=P, dst=R)


@spmd.global_spmd(tp)
def mlp_global_mistakes(x: Tensor[R@tp], w1: Tensor[S(0)@tp], w2: Tensor[R@tp], w3: Tensor[S(1)@tp]) -> Tensor[R@tp]:
    h = F.gelu(F.linear(x, w1))
    spmd.linear(h, w2, out_partial_axes=tp)  # E: spmd-shard-mismatch dim 'i' is split on one operand and whole on another
    y = F.linear(h, w3)  # E: spmd-sharded-contraction spmd.linear(..., out_partial_axes=tp)
    return spmd.all_reduce(y, tp, src=P, dst=R)


@spmd.global_spmd(tp)
def sequence_parallel(x: Tensor[S(-3)@tp, V@dp], g: Tensor[R@tp], w1: Tensor[S(0)@tp], w2: Tensor[S(1)@tp]) -> Tensor[S(-3)@tp, V@dp]:
    # Megatron's sequence parallelism on [s, b, h]: norm on the split sequence, gather, MLP,
    # reduce-scatter. The sequence dim is written from the back (-3): the norm runs over dim -1,
    # which S(0) could be for a 1-D tensor.
    n = F.layer_norm(x, [1024], g)
    reveal_type(n)  # N: Tensor[V@dp, S(-3)@tp]
    full = spmd.all_gather(n, tp, src=S(-3), dst=R)
    h = F.gelu(F.linear(full, w1))
    y = spmd.linear(h, w2, out_partial_axes=tp)
    return spmd.reduce_scatter(y, tp, src=P, dst=S(-3))


@spmd.global_spmd(tp)
def sequence_dim_from_the_front(x: Tensor[S(0)@tp], g: Tensor[R@tp]) -> None:
    F.layer_norm(x, [1024], g)  # E: spmd-shard-mismatch both from the back (S(-k)@tp with negative dims)
