"""Partials pending avg, max or min (docs/spec.md#pending-reductions): which ops keep them."""
import torch

import spmd_stubs as spmd
from spmd_stubs import P, Pavg, Pmax, Pmin, R, Tensor, V
from spmd_stubs.axes import tp


def spellings(a: Tensor[Pavg@tp], b: Tensor[Pmax[tp]], c: Tensor[Pmin@tp]) -> None:
    reveal_type(a)  # N: Tensor[Pavg@tp]
    reveal_type(b)  # N: Tensor[Pmax@tp]
    reveal_type(c)  # N: Tensor[Pmin@tp]


def average_is_affine(a: Tensor[Pavg@tp], bias: Tensor[R@tp]) -> None:
    reveal_type(a + bias)  # N: Tensor[Pavg@tp]
    reveal_type(a * 2.0)  # N: Tensor[Pavg@tp]
    a.exp()  # E: spmd-partial-nonlinear


def sum_is_not(p: Tensor[P@tp], bias: Tensor[R@tp]) -> None:
    p + bias  # E: spmd-partial-affine


def mixed_reductions(a: Tensor[Pavg@tp], p: Tensor[P@tp]) -> None:
    a + p  # E: spmd-partial-affine


def max_through_monotone_ops(m: Tensor[Pmax@tp], r: Tensor[R@tp]) -> None:
    reveal_type(m.exp())  # N: Tensor[Pmax@tp]
    reveal_type(torch.relu(m))  # N: Tensor[Pmax@tp]
    reveal_type(m + r)  # N: Tensor[Pmax@tp]
    reveal_type(m - r)  # N: Tensor[Pmax@tp]
    reveal_type(-m)  # N: Tensor[Pmin@tp]
    reveal_type(r - m)  # N: Tensor[Pmin@tp]
    reveal_type(m.amax(-1))  # N: Tensor[Pmax@tp]
    reveal_type(m.transpose(0, 1))  # N: Tensor[Pmax@tp]
    reveal_type(torch.cat([m, m], dim=0))  # N: Tensor[Pmax@tp]


def max_is_not_linear(m: Tensor[Pmax@tp], r: Tensor[R@tp], v: Tensor[V@tp]) -> None:
    m.sum(-1)  # E: spmd-partial-nonlinear
    m * r  # E: spmd-partial-nonlinear
    m + m  # E: spmd-partial-mul
    m.amin(-1)  # E: spmd-partial-nonlinear
    m + v  # E: spmd-partial-varying


def vocab_parallel_max(logits: Tensor[V@tp]) -> Tensor[R@tp]:
    local_max = logits.amax(-1)
    pending = spmd.reinterpret(local_max, tp, src=V, dst=Pmax)
    return spmd.all_reduce(pending, tp, src=Pmax, dst=R)


def creation(x: Tensor[R@tp]) -> None:
    reveal_type(spmd.convert(x, tp, src=R, dst=Pmax))  # N: Tensor[Pmax@tp]
    spmd.reinterpret(x, tp, src=R, dst=Pmax)  # E: spmd-invalid-transition


def max_loss(loss: Tensor[Pmax@tp]) -> None:
    loss.backward()  # E: spmd-backward
