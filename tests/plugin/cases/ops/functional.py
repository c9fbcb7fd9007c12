"""torch.nn.functional and composite ops, by their decompositions."""
import torch
import torch.nn.functional as F

from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import dp, tp


def linear(x: Tensor[R@tp], w: Tensor[S(0)@tp], b: Tensor[S(0)@tp], h: Tensor[V@tp], w2: Tensor[S(1)@tp], b2: Tensor[R@tp], p: Tensor[P@tp]) -> None:
    reveal_type(F.linear(x, w))  # N: Tensor[V@tp]
    reveal_type(F.linear(x, w, b))  # N: Tensor[V@tp]
    reveal_type(F.linear(p, b2))  # N: Tensor[P@tp]
    F.linear(p, b2, b2)  # E: spmd-partial-affine
    reveal_type(torch.addmm(b2, x, b2))  # N: Tensor[R@tp]
    torch.addmm(b2, p, b2)  # E: spmd-partial-affine


def activations(x: Tensor[V@tp, R@dp], p: Tensor[P@tp]) -> None:
    reveal_type(F.gelu(x))  # N: Tensor[R@dp, V@tp]
    reveal_type(F.silu(x))  # N: Tensor[R@dp, V@tp]
    reveal_type(F.relu(x))  # N: Tensor[R@dp, V@tp]
    reveal_type(F.softmax(x, dim=-1))  # N: Tensor[R@dp, V@tp]
    reveal_type(F.log_softmax(x, -1))  # N: Tensor[R@dp, V@tp]
    reveal_type(F.dropout(x, 0.1))  # N: Tensor[R@dp, V@tp]
    F.silu(p)  # E: spmd-partial-nonlinear silu
    F.softmax(p, -1)  # E: spmd-partial-nonlinear
    F.dropout(p)  # E: spmd-partial-nonlinear


def norms(x: Tensor[S(0)@tp], w_r: Tensor[R@tp], w_i: Tensor[I@tp], y: Tensor[I@tp]) -> None:
    reveal_type(F.layer_norm(x, [8], w_r, w_r))  # N: Tensor[V@tp]
    reveal_type(F.rms_norm(x, [8], w_r))  # N: Tensor[V@tp]
    reveal_type(F.layer_norm(y, [8], w_i, w_i))  # N: Tensor[I@tp]
    F.layer_norm(x, [8], w_i, w_i)  # E: spmd-invariant-mix
    F.rms_norm(x, [8], w_i)  # E: spmd-invariant-mix


def embedding_and_loss(ids: Tensor[R@tp, V@dp], table: Tensor[S(0)@tp], logits: Tensor[I@tp], target: Tensor[I@tp], p: Tensor[P@tp]) -> None:
    reveal_type(F.embedding(ids, table))  # N: Tensor[V@tp]
    reveal_type(F.cross_entropy(logits, target))  # N: Tensor[I@tp]
    F.cross_entropy(p, target)  # E: spmd-partial-nonlinear


def attention(q: Tensor[V@tp], k: Tensor[V@tp], v: Tensor[V@tp], pv: Tensor[P@tp], r: Tensor[R@tp]) -> None:
    reveal_type(F.scaled_dot_product_attention(q, k, v))  # N: Tensor[V@tp]
    reveal_type(F.scaled_dot_product_attention(r, r, pv))  # N: Tensor[P@tp]
    F.scaled_dot_product_attention(pv, r, r)  # E: spmd-partial-nonlinear


def select_ops(x: Tensor[P@tp], mask: Tensor[R@tp], vmask: Tensor[V@tp], pmask: Tensor[P@tp], r: Tensor[R@tp]) -> None:
    reveal_type(torch.where(mask, x, x))  # N: Tensor[P@tp]
    reveal_type(r[vmask])  # N: Tensor[V@tp]
    reveal_type(x.masked_fill(mask, 0.0))  # E: spmd-partial-affine # N: Tensor[Any]
    r[pmask]  # E: spmd-partial-nonlinear as an index
    reveal_type(torch.gather(r, 0, vmask))  # N: Tensor[V@tp]


def views_and_variadic(w: Tensor[S(0)@tp], a: Tensor[R@tp], b: Tensor[V@tp]) -> None:
    reveal_type(w.T)  # N: Tensor[V@tp]
    reveal_type(w.mT)  # N: Tensor[V@tp]
    reveal_type(torch.einsum("ij,jk->ik", a, b))  # N: Tensor[V@tp]
    reveal_type(torch.cat((a, b), dim=0))  # N: Tensor[V@tp]
    reveal_type(a.chunk(2))  # N: tuple[torch._tensor.Tensor[R@tp], ...]
    reveal_type(a.float().to(torch.bfloat16).contiguous())  # N: Tensor[R@tp]


def factories(p: Tensor[P@tp], r: Tensor[R@tp], i: Tensor[I@tp]) -> None:
    p.add(torch.ones(3))  # E: spmd-partial-affine
    torch.add(p, torch.zeros(3))  # E: spmd-partial-affine
    p + torch.ones(3)  # E: spmd-partial-affine
    reveal_type(i + torch.ones(3))  # N: Tensor[I@tp]
    reveal_type(r * torch.zeros_like(r))  # N: Tensor[R@tp]
    reveal_type(p * torch.full((3,), 2.0))  # N: Tensor[P@tp]
    reveal_type(torch.zeros(3))  # N: Tensor[Any]
    reveal_type(p + torch.randn(3))  # N: Tensor[P@tp]
