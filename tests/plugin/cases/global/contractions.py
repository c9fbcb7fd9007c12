"""Matmul, @, mm, bmm, F.linear and einsum: the einsum rule (docs/spec.md#global-spmd) per global axis."""
import torch
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import P, R, S, Tensor, V
from spmd_stubs.axes import dp, tp


@spmd.global_spmd(tp)
def column_parallel(x: Tensor[R@tp], w: Tensor[S(0)@tp], b: Tensor[S(0)@tp], wt: Tensor[S(-1)@tp]) -> None:
    reveal_type(F.linear(x, w))  # N: Tensor[S(-1)@tp]
    reveal_type(F.linear(x, w, b))  # N: Tensor[S(-1)@tp]
    reveal_type(x @ w.T)  # N: Tensor[S(-1)@tp]
    reveal_type(x @ wt)  # N: Tensor[S(-1)@tp]
    reveal_type(torch.matmul(x, wt))  # N: Tensor[S(-1)@tp]
    reveal_type(torch.einsum("bsh,oh->bso", x, w))  # N: Tensor[S(2)@tp]
    reveal_type(torch.einsum("bsh,ho->bso", x, wt))  # N: Tensor[S(-1)@tp]


@spmd.global_spmd(tp)
def batch_sharded(x: Tensor[S(0)@tp], w: Tensor[R@tp], a: Tensor[S(0)@tp], m: Tensor[S(0)@tp]) -> None:
    reveal_type(x @ w)  # N: Tensor[S(0)@tp]
    reveal_type(F.linear(x, w))  # N: Tensor[S(0)@tp]
    reveal_type(torch.bmm(a, m))  # N: Tensor[S(0)@tp]
    reveal_type(torch.mm(x, w))  # N: Tensor[S(0)@tp]
    reveal_type(torch.einsum("...h,ho->...o", x, w))  # N: Tensor[S(0)@tp]


@spmd.global_spmd(tp)
def contraction_needs_out_partial_axes(h: Tensor[S(-1)@tp], w: Tensor[S(1)@tp], wt: Tensor[S(0)@tp]) -> None:
    F.linear(h, w)  # E: spmd-sharded-contraction spmd.linear(..., out_partial_axes=tp)
    h @ wt  # E: spmd-sharded-contraction spmd.matmul(..., out_partial_axes=tp)
    torch.einsum("bsf,fo->bso", h, wt)  # E: spmd-sharded-contraction spmd.einsum(..., out_partial_axes=tp)
    reveal_type(spmd.matmul(h, wt, out_partial_axes=tp))  # N: Tensor[P@tp]
    reveal_type(spmd.einsum("bsf,fo->bso", h, wt, out_partial_axes=tp))  # N: Tensor[P@tp]


@spmd.global_spmd(tp)
def mismatched(x: Tensor[R@tp], w: Tensor[S(0)@tp], b: Tensor[R@tp], h: Tensor[S(-1)@tp], w2: Tensor[R@tp], q: Tensor[S(0)@tp], r: Tensor[S(-1)@tp]) -> None:
    F.linear(x, w, b)  # E: spmd-shard-mismatch convert(w, tp, src=R, dst=S(0)) on the whole operand
    F.linear(h, w2)  # E: spmd-shard-mismatch split on one operand and whole on another
    torch.einsum("ij,jk->ik", q, w)  # E: spmd-shard-mismatch the axis splits different dims of the operands
    x @ r.mT  # E: spmd-shard-mismatch dim 'j' is split on one operand and whole on another


@spmd.global_spmd(tp)
def attention(q: Tensor[S(1)@tp], k: Tensor[S(1)@tp], v: Tensor[S(1)@tp], m: Tensor[R@tp], ks: Tensor[S(-2)@tp], qs: Tensor[S(-2)@tp], kr: Tensor[R@tp]) -> None:
    # Heads (dim 1 of [b, h, s, d]) split over tp: attention runs per head.
    reveal_type(F.scaled_dot_product_attention(q, k, v))  # N: Tensor[S(1)@tp]
    reveal_type(F.scaled_dot_product_attention(q, k, v, m))  # N: Tensor[S(1)@tp]
    # Queries split on the sequence: each query row attends to every (whole) key.
    reveal_type(F.scaled_dot_product_attention(qs, kr, kr))  # N: Tensor[S(-2)@tp]
    # Keys split on the sequence: the softmax runs over the split dim.
    F.scaled_dot_product_attention(kr, ks, ks)  # E: spmd-sharded-contraction all_gather


def local_mode(h: Tensor[S(-1)@tp], w: Tensor[S(1)@tp]) -> None:
    # Local SPMD: a per-rank matmul, no error; the result is V.
    reveal_type(F.linear(h, w))  # N: Tensor[V@tp]


@spmd.global_spmd(tp)
def ambiguous(x: Tensor[R@tp], w: Tensor[S(1)@tp]) -> None:
    # x @ w is [.., k] if x is 1-D and [.., i, k] otherwise: S(1) of w is not a fixed dim of the result.
    x @ w  # E: spmd-shard-mismatch both from the back
