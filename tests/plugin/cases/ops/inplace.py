"""In-place ops and out= keep the written tensor's type; a result of another type is spmd-inplace."""
import torch

from spmd_stubs import I, P, R, Tensor, V
from spmd_stubs.axes import tp


def keeps(p: Tensor[P@tp], q: Tensor[P@tp], r: Tensor[R@tp], v: Tensor[V@tp]) -> None:
    p.add_(q)
    p.mul_(r)
    p += q
    p *= 2.0
    reveal_type(p.neg_())  # N: Tensor[P@tp]
    torch.add(p, q, out=p)


def changes(p: Tensor[P@tp], r: Tensor[R@tp], v: Tensor[V@tp]) -> None:
    r.mul_(v)  # E: spmd-inplace from R@tp to V@tp
    r += v  # E: spmd-inplace
    torch.mul(r, v, out=r)  # E: spmd-inplace
    p.add_(r)  # E: spmd-partial-affine
    p.exp_()  # E: spmd-partial-nonlinear


def into_unknown(t: torch.Tensor, v: Tensor[V@tp]) -> None:
    t.add_(v)
    reveal_type(t)  # N: Tensor[Any]
