"""Odd and broken inputs: diagnostics where due, never a crash or an spmd-internal error."""
from typing import Any, TypeVar

import torch

import spmd_stubs
from spmd_stubs import I, P, R, S, Tensor, V, all_gather, all_reduce, assert_type, convert
from spmd_stubs.axes import dp, tp

T = TypeVar("T")


def quoted(x: "Tensor[R@tp]") -> None:  # E: spmd-annotation canonical form
    reveal_type(x)  # N: Tensor[Any]


def quoted_canonical(x: "Tensor[R[tp]]") -> None:
    reveal_type(x)  # N: Tensor[R@tp]


def odd_arguments(x: Tensor[1], y: Tensor[...], z: Tensor[R@tp][0]) -> None: ...  # E: spmd-annotation # E: spmd-annotation # E: valid-type


def bare(x: Tensor) -> None:
    reveal_type(x)  # N: Tensor[Any]


def generic(x: T) -> T:
    return x


def calls(x: Tensor[P@tp], args: Any, kwargs: Any, t: torch.Tensor) -> None:
    reveal_type(generic(x))  # N: Tensor[P@tp]
    all_reduce(*args)  # E: call-overload
    all_reduce(x, **kwargs)
    all_reduce(x, tp, dst=S)  # E: call-overload
    all_gather(x, tp, src=S(0, 1), dst=R)  # E: spmd-annotation # E: call-arg
    assert_type(x)
    assert_type(x, R)  # E: spmd-annotation
    f = lambda y: y * x  # noqa: E731
    reveal_type([x, x])  # N: list[torch._tensor.Tensor[P@tp]]
    reveal_type({"a": x}["a"] * 2)  # N: Tensor[P@tp]
    reveal_type(x.new_zeros(3))  # N: Tensor[Any]
    reveal_type(x.shape)  # N: torch._C.Size
    reveal_type(spmd_stubs.convert(t, (dp, tp), src=I, dst=S(-1)))  # N: Tensor[S(-1)@dp, S(-1)@tp]


class Holder:
    value: Tensor[V@dp]

    def get(self) -> Tensor[V@dp]:
        return self.value * self.value
