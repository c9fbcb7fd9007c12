"""x[i] = y is an in-place write: x keeps its type, which the written values must not change."""
import torch

from spmd_stubs import I, P, R, S, Tensor, V, all_reduce
from spmd_stubs.axes import dp, tp
from spmd_stubs.types import Pmax


def accepted(
    r: Tensor[R@tp], r2: Tensor[R@tp], v: Tensor[V@tp], s: Tensor[S(0)@tp], p: Tensor[P@tp], q: Tensor[P@tp],
    m: Tensor[Pmax@tp], i: Tensor[I@tp], mask: Tensor[R@tp], vmask: Tensor[V@tp], u: torch.Tensor,
) -> None:
    r[0] = r2
    r[:, 1:3] = 1.0
    r[mask] = 0.0
    r[0, mask] = r2
    r[0] = u  # an untyped value: unknown, accepted
    r[0] = torch.zeros(3)  # a constant is R
    r[0] = all_reduce(p, tp, src=P, dst=R)
    v[0] = r2  # R into V: x varies anyway
    v[vmask] = v
    s[vmask] = 0.0
    v[0] = s
    p[0] = q
    p[mask] = q
    p[mask] = 0.0  # zeros are a part of any pending sum: masked rows zeroed, as Megatron does
    p[0] = 0
    m[0] = r2  # a replicated value is its own max
    i[0] = i
    i[0] = 2.0
    reveal_type(r)  # N: Tensor[R@tp]


def rejected(
    r: Tensor[R@tp], r2: Tensor[R@tp], v: Tensor[V@tp], s: Tensor[S(0)@tp], p: Tensor[P@tp],
    m: Tensor[Pmax@tp], i: Tensor[I@tp], mask: Tensor[R@tp], vmask: Tensor[V@tp],
) -> None:
    r[0] = p  # E: spmd-inplace writes y of type P@tp into x of type R@tp on axis tp
    r[:, 1:3] = v  # E: spmd-inplace writes y of type V@tp into x of type R@tp on axis tp In `r[:, 1:3]`: a tensor written in place keeps its type, and its ranks would then hold different values. Fix (needs your choice): write a value that is R
    r[0] = s  # E: spmd-inplace writes y of type S(0)@tp into x of type R@tp
    r[vmask] = 0.0  # E: spmd-inplace writes at positions that differ between ranks on axis tp (x: R@tp, i: V@tp)
    r[p] = r2  # E: spmd-partial-nonlinear uses a Partial tensor as the index on axis tp (x: R@tp, i: P@tp)
    v[0] = p  # E: spmd-inplace Fix: all_reduce(y, tp, src=P, dst=R) first.
    v[0] = i  # E: spmd-inplace Fix: convert(y, tp, src=I, dst=R) first.
    p[0] = r2  # E: spmd-inplace Fix: convert(y, tp, src=R, dst=P)
    p[0] = v  # E: spmd-inplace Fix (needs your choice): reinterpret(y, tp, src=V, dst=P)
    p[0] = 1.0  # E: spmd-inplace writes a python scalar into x of type P@tp on axis tp
    p[vmask] = p  # E: spmd-inplace (x: P@tp, i: V@tp)
    p[vmask] = 0.0  # E: spmd-inplace (x: P@tp, i: V@tp)
    m[0] = p  # E: spmd-inplace x would then mix Pmax@tp and P@tp elements
    i[0] = r2  # E: spmd-inplace Fix: convert(y, tp, src=R, dst=I, expert_mode=True) first.
    r[0] += p  # E: spmd-partial-affine


def per_axis(x: Tensor[R@tp, V@dp], y: Tensor[V@tp, R@dp], z: Tensor[R@tp]) -> None:
    x[0] = z  # z does not mention dp: unknown there
    x[0] = y  # E: spmd-inplace on axis tp


def unions(flag: bool, r: Tensor[R@tp], a: Tensor[R@tp], b: Tensor[V@tp]) -> None:
    y = a if flag else b
    r[0] = y  # E: spmd-inplace writes y of type V@tp
