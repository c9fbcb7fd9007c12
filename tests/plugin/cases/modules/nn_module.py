"""Calling an nn.Module checks the call against its forward (with axis polymorphism)."""
import torch
from torch import nn

from spmd_stubs import I, P, R, S, Tensor, V, all_reduce, convert
from spmd_stubs.axes import dp, tp


class ColumnParallel(nn.Module):
    weight: Tensor[S(0)@tp]

    def forward(self, x: Tensor[R@tp]) -> Tensor[V@tp]:
        return x @ self.weight.T


class Untyped(nn.Module):
    def forward(self, x):  # type: ignore[no-untyped-def]
        return x


class OwnCall(nn.Module):
    def __call__(self, x: Tensor[R@tp]) -> Tensor[P@tp]:
        return convert(x, tp, src=R, dst=P)

    def forward(self, x: Tensor[R@tp]) -> Tensor[R@tp]:
        return x


def own_call(m: OwnCall, x: Tensor[R@tp]) -> None:
    reveal_type(m(x))  # N: Tensor[P@tp]


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.column = ColumnParallel()
        self.untyped = Untyped()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: Tensor[I@tp, V@dp], p: Tensor[P@tp]) -> None:
        reveal_type(self.column(convert(x, tp, src=I, dst=R)))  # N: Tensor[V@dp, V@tp]
        self.column(x)  # E: arg-type expected "Tensor[V@dp, R@tp]"
        self.column(p, 1)  # E: call-arg # E: arg-type
        reveal_type(self.untyped(x))  # N: Any
        reveal_type(self.linear(x))  # N: Tensor[V@dp, I@tp]
