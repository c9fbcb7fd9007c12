"""Operands that carry no gradient take no part in the rule for Invariant (docs/spec.md#local-rules).

An I value must get the same gradient on every rank; a mask, class indices,
a detached value or anything computed under ``torch.no_grad()`` gets none,
and where it is R or I it is judged as a constant.  The rules for Partial
(forward values) are unchanged.
"""
import torch
import torch.nn.functional as F

from spmd_stubs import I, P, R, Tensor, V
from spmd_stubs.axes import tp


def masks(out: Tensor[V@tp], x: Tensor[I@tp], m: Tensor[I@tp], w: Tensor[I@tp]) -> None:
    reveal_type(out * ~m)  # N: Tensor[V@tp]
    keep = x > 0
    reveal_type(out * keep)  # N: Tensor[V@tp]
    reveal_type(out * keep.long())  # N: Tensor[V@tp]
    reveal_type(out * x.argmax(-1))  # N: Tensor[V@tp]
    reveal_type(w * (x > 0).float().sum().detach())  # N: Tensor[I@tp]
    # A count that varies: w's gradient would vary too.
    w * (out > 0).float().sum().detach()  # E: spmd-invariant-mix
    reveal_type(w + torch.ones(2))  # N: Tensor[I@tp]
    out * m  # E: spmd-invariant-mix
    scaled = w * 2.0  # carries w's gradient
    out * scaled  # E: spmd-invariant-mix


def class_indices(logits: Tensor[V@tp], targets: Tensor[I@tp], labels: Tensor[R@tp]) -> None:
    reveal_type(F.cross_entropy(logits, targets))  # N: Tensor[V@tp]
    reveal_type(F.nll_loss(logits, labels))  # N: Tensor[V@tp]


def detached(g: Tensor[V@tp], w: Tensor[I@tp], p: Tensor[P@tp]) -> None:
    g.detach().mul_(w.detach())
    g.mul_(w)  # E: spmd-invariant-mix
    p + w.detach()  # E: spmd-invariant-mix


@torch.no_grad()
def clip(grads: list[Tensor[V@tp]], coef: Tensor[I@tp], r: Tensor[R@tp]) -> None:
    for g in grads:
        g.mul_(coef)
    reveal_type(r * coef)  # N: Tensor[R@tp]


def clip_in_a_block(g: Tensor[V@tp], coef: Tensor[I@tp]) -> None:
    with torch.no_grad():
        g.mul_(coef)
    g.mul_(coef)  # E: spmd-invariant-mix


def writes(out: Tensor[I@tp], r: Tensor[R@tp], i: Tensor[I@tp], p: Tensor[P@tp]) -> None:
    out.copy_(torch.zeros(2))
    out[0] = torch.ones(2)
    r.copy_(i.detach())
    r.copy_(i)  # E: spmd-inplace
    p.copy_(torch.ones(2))  # E: spmd-inplace


def indices_and_samples(out: Tensor[V@tp], x: Tensor[I@tp], edges: Tensor[I@tp]) -> None:
    reveal_type(out * torch.bucketize(x, edges))  # N: Tensor[V@tp]
    reveal_type(out * torch.searchsorted(edges, x))  # N: Tensor[V@tp]
    reveal_type(out * x.isposinf())  # N: Tensor[V@tp]
    reveal_type(out * torch.multinomial(x, 1))  # N: Tensor[V@tp]
    reveal_type(out * x.bernoulli_())  # N: Tensor[V@tp]
    reveal_type(torch.randint_like(x, 10))  # N: Tensor[Any]


if torch.cuda.is_available():
    @torch.no_grad()
    def clip_where_defined_under_a_condition(g: Tensor[V@tp], coef: Tensor[I@tp]) -> None:
        g.mul_(coef)
