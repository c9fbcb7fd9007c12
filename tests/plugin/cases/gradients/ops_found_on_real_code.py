"""Ops that real training code uses and that lost the SPMD type: norms, named results, copy_, stacks."""
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import flex_attention

from spmd_stubs import I, P, R, Tensor, V
from spmd_stubs.axes import tp


def norms(x: Tensor[V@tp], p: Tensor[P@tp]) -> None:
    reveal_type(torch.norm(x))  # N: Tensor[V@tp]
    reveal_type(x.norm())  # N: Tensor[V@tp]
    reveal_type(x.norm(2.0))  # N: Tensor[V@tp]
    p.norm()  # E: spmd-partial-nonlinear


def named_results(x: Tensor[V@tp]) -> None:
    reveal_type(x.max(0).values)  # N: Tensor[V@tp]
    reveal_type(x.max(0).indices)  # N: Tensor[V@tp]
    reveal_type(x.topk(2).values)  # N: Tensor[V@tp]
    reveal_type(torch.sort(x).indices)  # N: Tensor[V@tp]
    reveal_type(x.max(0)[0])  # N: Tensor[V@tp]


def stacks(grads: list[Tensor[V@tp]], p: Tensor[P@tp]) -> None:
    reveal_type(torch.stack([g.norm() for g in grads]))  # N: Tensor[V@tp]
    norms = []
    for g in grads:
        norms.append(g.norm())
    reveal_type(torch.stack(norms))  # N: Tensor[V@tp]
    torch.stack([p, grads[0]])  # E: spmd-partial-varying


def copies(out: Tensor[I@tp], product: Tensor[P@tp], full: Tensor[I@tp]) -> None:
    out.copy_(product)  # E: spmd-inplace
    reveal_type(out.copy_(full))  # N: Tensor[I@tp]


def found_in_transformer_blocks(x: Tensor[V@tp], p: Tensor[P@tp], idx: Tensor[I@tp], src: Tensor[V@tp]) -> None:
    """Unmodelled ops found in megatron-core's and torchtitan's transformer blocks."""
    reveal_type(x.bool())  # N: Tensor[V@tp]
    p.long()  # E: spmd-partial-nonlinear
    reveal_type(torch.view_as_real(x))  # N: Tensor[V@tp]
    reveal_type(x.scatter_add(0, idx, src))  # N: Tensor[V@tp]
    reveal_type(p.zero_())  # N: Tensor[P@tp]
    reveal_type(torch.diff(x))  # N: Tensor[V@tp]


def found_in_nanotron_and_picotron(q: Tensor[V@tp], k: Tensor[V@tp], r: Tensor[R@tp], p: Tensor[P@tp]) -> None:
    """Unmodelled ops found in nanotron's and picotron's transformer blocks."""
    reveal_type(F.logsigmoid(q - k))  # N: Tensor[V@tp]
    F.logsigmoid(p)  # E: spmd-partial-nonlinear
    reveal_type(flex_attention(q, k, q))  # N: Tensor[V@tp]
    reveal_type(flex_attention(r, r, p))  # N: Tensor[P@tp]
    flex_attention(q, k, p)  # E: spmd-partial-varying
    reveal_type(r.fill_(1.0))  # N: Tensor[R@tp]
    p.fill_(r)  # E: spmd-inplace
