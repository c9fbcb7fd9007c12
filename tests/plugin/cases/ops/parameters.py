"""Arguments that are never tensors (einsum's equation, cat's and softmax's dim) are no operands.

They neither appear in the operand list of a message nor take part in the
judgement: a ``dim`` is not a term of ``cat``'s sum.
"""
import torch
import torch.nn.functional as F

from spmd_stubs import P, R, Tensor, V
from spmd_stubs.axes import tp


def einsum_equation(p: Tensor[P@tp], q: Tensor[P@tp], r: Tensor[R@tp], v: Tensor[V@tp]) -> None:
    reveal_type(torch.einsum("ij,jk->ik", p, r))  # N: Tensor[P@tp]
    reveal_type(torch.einsum("ij,jk->ik", v, r))  # N: Tensor[V@tp]
    torch.einsum("ij,jk->ik", p, q)  # E: spmd-partial-mul on axis tp (P@tp * P@tp) In `torch.einsum("ij,jk->ik", p, q)`: a product
    torch.einsum("ij,jk->ik", [p, q])  # E: spmd-partial-mul (P@tp * P@tp)
    torch.einsum("ij,jk->ik", p, v)  # E: spmd-partial-varying (P@tp * V@tp)
    torch.einsum(p, [0, 1], q, [1, 2], [0, 2])  # E: spmd-partial-mul (P@tp * P@tp)


def cat_dim(p: Tensor[P@tp], q: Tensor[P@tp], r: Tensor[R@tp]) -> None:
    reveal_type(torch.cat([p, q], 1))  # N: Tensor[P@tp]
    reveal_type(torch.cat((p, q), dim=-1))  # N: Tensor[P@tp]
    reveal_type(torch.stack([p, q], 1))  # N: Tensor[P@tp]
    torch.cat([p, r], dim=1)  # E: spmd-partial-affine (P@tp + R@tp) In `torch.cat([p, r], dim=1)`: the R@tp term


def softmax_dim(p: Tensor[P@tp]) -> None:
    F.softmax(p, -1)  # E: spmd-partial-nonlinear (P@tp)
    p.clamp(0.0, 1.0)  # E: spmd-partial-nonlinear (P@tp)
