"""out_partial_axes: the only way to get a Partial from a contraction, in local and in global SPMD."""
import torch

import spmd_stubs as spmd
from spmd_stubs import P, R, S, Tensor, V
from spmd_stubs.axes import dp, tp


def local_mode(h: Tensor[V@tp], w: Tensor[V@tp], r: Tensor[R@tp], x: Tensor[V@tp, V@dp]) -> None:
    # Local SPMD: the local op, then reinterpret(V, P) on each named axis.
    reveal_type(spmd.linear(h, w, out_partial_axes=tp))  # N: Tensor[P@tp]
    reveal_type(spmd.matmul(h, r, out_partial_axes=tp))  # N: Tensor[P@tp]
    reveal_type(spmd.einsum("ij,jk->ik", h, w, out_partial_axes=tp))  # N: Tensor[P@tp]
    reveal_type(spmd.sum(x, out_partial_axes=(dp, tp)))  # N: Tensor[P@dp, P@tp]
    reveal_type(spmd.amax(h, -1, out_partial_axes=tp))  # N: Tensor[Pmax@tp]
    reveal_type(spmd.amin(h, -1, out_partial_axes=tp))  # N: Tensor[Pmin@tp]
    reveal_type(spmd.linear(h, w))  # N: Tensor[V@tp]
    spmd.matmul(r, r, out_partial_axes=tp)  # E: spmd-invalid-transition counted once per rank
    reveal_type(spmd.matmul(torch.ones(2, 2), torch.ones(2, 2), out_partial_axes=tp))  # N: Tensor[P@tp]


@spmd.global_spmd(tp)
def global_mode(h: Tensor[S(-1)@tp], w: Tensor[S(1)@tp], x: Tensor[R@tp], wc: Tensor[S(0)@tp], d: Tensor[V@dp, S(-1)@tp]) -> None:
    reveal_type(spmd.linear(h, w, out_partial_axes=tp))  # N: Tensor[P@tp]
    spmd.linear(x, wc, out_partial_axes=tp)  # E: spmd-sharded-contraction drop tp from out_partial_axes
    spmd.sum(h, 0, out_partial_axes=tp)  # E: spmd-shard-mismatch both counted from the front
    spmd.sum(h, -2, out_partial_axes=tp)  # E: spmd-sharded-contraction drop tp
    # dp is local here: reinterpret V -> P on it, tp is global.
    reveal_type(spmd.sum(d, -1, out_partial_axes=(dp, tp)))  # N: Tensor[P@dp, P@tp]
    spmd.linear(h, w, out_partial_axes="tp")  # E: arg-type # E: spmd-annotation out_partial_axes takes a mesh axis


@spmd.global_spmd(tp)
def partial_is_never_implicit(h: Tensor[S(-1)@tp], w: Tensor[S(1)@tp]) -> Tensor[P@tp]:
    return h @ w.T  # E: spmd-sharded-contraction spmd.matmul(..., out_partial_axes=tp)


def bias_local(h: Tensor[V@tp], w: Tensor[V@tp], b: Tensor[R@tp], bv: Tensor[V@tp]) -> None:
    spmd.linear(h, w, b, out_partial_axes=tp)  # E: spmd-partial-affine add it after the reduction
    reveal_type(spmd.linear(h, w, bv, out_partial_axes=tp))  # N: Tensor[P@tp]


@spmd.global_spmd(tp)
def bias_global(h: Tensor[S(-1)@tp], w: Tensor[S(1)@tp], b: Tensor[R@tp]) -> Tensor[R@tp]:
    spmd.linear(h, w, b, out_partial_axes=tp)  # E: spmd-partial-affine counted once per rank
    return spmd.all_reduce(spmd.linear(h, w, out_partial_axes=tp), tp, src=P, dst=R) + b


@spmd.global_spmd(tp)
def pending_max(x: Tensor[S(-1)@tp]) -> None:
    m = spmd.amax(x, -1, keepdim=True, out_partial_axes=tp)
    reveal_type(m + 1.0)  # N: Tensor[Pmax@tp]
    reveal_type(spmd.all_reduce(m, tp, src=spmd.Pmax, dst=R))  # N: Tensor[R@tp]
