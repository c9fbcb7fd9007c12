"""Operators on a union operand are judged per member; the result is the union of the members' results."""
import torch

from spmd_stubs import I, P, R, Tensor, V
from spmd_stubs.axes import dp, tp


def one_value_one_member(c: bool, a: Tensor[R@tp], b: Tensor[I@tp]) -> None:
    y = a if c else b
    reveal_type(y * y)  # N: Tensor[R@tp] | torch._tensor.Tensor[I@tp]
    reveal_type(y + 1.0)  # N: Tensor[R@tp] | torch._tensor.Tensor[I@tp]
    reveal_type(1.0 - y)  # N: Tensor[R@tp] | torch._tensor.Tensor[I@tp]
    reveal_type(2.0 ** y)  # N: Tensor[R@tp] | torch._tensor.Tensor[I@tp]
    reveal_type(-y)  # N: Tensor[R@tp] | torch._tensor.Tensor[I@tp]


def each_member_with_a_typed_operand(c: bool, a: Tensor[R@tp], p: Tensor[P@tp], w: Tensor[R@tp]) -> None:
    y = a if c else p
    reveal_type(y @ w)  # N: Tensor[R@tp] | torch._tensor.Tensor[P@tp]
    reveal_type(w @ y)  # N: Tensor[R@tp] | torch._tensor.Tensor[P@tp]


def the_wrong_member_is_named(c: bool, a: Tensor[R@tp], b: Tensor[I@tp], v: Tensor[V@tp]) -> None:
    y = a if c else b
    reveal_type(y * v)  # E: spmd-invariant-mix (I@tp, V@tp) # N: Tensor[V@tp]
    v - y  # E: spmd-invariant-mix (V@tp, I@tp)


def three_members(c: bool, d: bool, a: Tensor[R@tp], b: Tensor[I@tp], v: Tensor[V@tp]) -> None:
    y = a if c else b if d else v
    reveal_type(y * y)  # N: Tensor[R@tp] | torch._tensor.Tensor[I@tp] | torch._tensor.Tensor[V@tp]
    reveal_type(y * 2.0)  # N: Tensor[R@tp] | torch._tensor.Tensor[I@tp] | torch._tensor.Tensor[V@tp]


def members_differ_on_two_axes(c: bool, a: Tensor[R@tp, V@dp], b: Tensor[I@tp, P@dp]) -> None:
    y = a if c else b
    reveal_type(y + y)  # N: Tensor[V@dp, R@tp] | torch._tensor.Tensor[P@dp, I@tp]
    reveal_type(y * 0.5)  # N: Tensor[V@dp, R@tp] | torch._tensor.Tensor[P@dp, I@tp]
    y * y  # E: spmd-partial-mul P@dp * P@dp
