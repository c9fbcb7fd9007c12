"""Each local propagation rule, passing and failing (docs/spec.md#local-rules)."""
import torch

from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import dp, tp


def replicate(a: Tensor[R@tp], b: Tensor[R@tp]) -> None:
    reveal_type(a * b)  # N: Tensor[R@tp]
    reveal_type(torch.exp(a) + b)  # N: Tensor[R@tp]


def invariant(a: Tensor[I@tp], b: Tensor[I@tp], r: Tensor[R@tp], v: Tensor[V@tp]) -> None:
    reveal_type(a + b)  # N: Tensor[I@tp]
    reveal_type(a * 2)  # N: Tensor[I@tp]
    a + r  # E: spmd-invariant-mix add mixes Invariant with Replicate on axis tp
    a * v  # E: spmd-invariant-mix
    torch.cat([a, r])  # E: spmd-invariant-mix


def varying(r: Tensor[R@tp], v: Tensor[V@tp], s: Tensor[S(0)@tp]) -> None:
    reveal_type(r + v)  # N: Tensor[V@tp]
    reveal_type(r @ v)  # N: Tensor[V@tp]
    reveal_type(s.relu())  # N: Tensor[V@tp]


def partial_linear(p: Tensor[P@tp], q: Tensor[P@tp], r: Tensor[R@tp], v: Tensor[V@tp]) -> None:
    reveal_type(-p)  # N: Tensor[P@tp]
    reveal_type(p.sum(0))  # N: Tensor[P@tp]
    reveal_type(p.view(4, 2).transpose(0, 1))  # N: Tensor[P@tp]
    reveal_type(p + q)  # N: Tensor[P@tp]
    reveal_type(p - q)  # N: Tensor[P@tp]
    reveal_type(torch.stack([p, q]))  # N: Tensor[P@tp]
    reveal_type(p * r)  # N: Tensor[P@tp]
    reveal_type(p * 3.0)  # N: Tensor[P@tp]
    reveal_type(2 * p)  # N: Tensor[P@tp]
    reveal_type(p / r)  # N: Tensor[P@tp]
    reveal_type(p @ r)  # N: Tensor[P@tp]
    reveal_type(p[0])  # N: Tensor[P@tp]
    reveal_type(p[:, 1:3])  # N: Tensor[P@tp]


def partial_errors(p: Tensor[P@tp], q: Tensor[P@tp], r: Tensor[R@tp], v: Tensor[V@tp]) -> None:
    p * q  # E: spmd-partial-mul P@tp * P@tp
    p @ q  # E: spmd-partial-mul
    torch.matmul(p, q)  # E: spmd-partial-mul
    p + r  # E: spmd-partial-affine P@tp + R@tp
    p + 1.0  # E: spmd-partial-affine
    1.0 + p  # E: spmd-partial-affine the scalar term would be counted once per rank
    2.0 / p  # E: spmd-partial-nonlinear truediv is nonlinear
    reveal_type(2 * p)  # N: Tensor[P@tp]
    reveal_type(1 - 0.1 * r)  # N: Tensor[R@tp]
    torch.cat([p, r])  # E: spmd-partial-affine
    p.exp()  # E: spmd-partial-nonlinear exp is nonlinear
    torch.tanh(p)  # E: spmd-partial-nonlinear
    p ** 2  # E: spmd-partial-nonlinear
    p > 0  # E: spmd-partial-nonlinear
    r / p  # E: spmd-partial-nonlinear
    p + v  # E: spmd-partial-varying
    p * v  # E: spmd-partial-varying


def per_axis(x: Tensor[R@tp, V@dp], y: Tensor[V@tp, P@dp]) -> None:
    reveal_type(x + x)  # N: Tensor[V@dp, R@tp]
    x * y  # E: spmd-partial-varying on axis dp


def unknown_operands(p: Tensor[P@tp], t: torch.Tensor, other: Tensor[V@dp]) -> None:
    reveal_type(p + t)  # N: Tensor[P@tp]
    reveal_type(t.exp())  # N: Tensor[Any]
    reveal_type(p * other)  # N: Tensor[V@dp, P@tp]
