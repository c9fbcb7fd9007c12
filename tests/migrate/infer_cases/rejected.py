"""A subclass whose unannotated ``forward`` is called with another type than its base declares.

The only call passes ``I@tp``, so the naive annotation is ``x: Tensor[I@tp]``;
mypy then rejects the override (the base's ``forward`` takes ``R@tp``).  In
the same round the weight of ``Holder`` above is declared, a line of its
class: the TODO still names the line it is written on.
"""

from torch import nn

from spmd_stubs import I, R, Tensor
from spmd_stubs.axes import tp


class Holder(nn.Module):
    bias: Tensor[I@tp]

    def __init__(self, weight: Tensor[I@tp], bias: Tensor[I@tp]) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight)
        self.bias = nn.Parameter(bias)


class Layer(nn.Module):
    def forward(self, x: Tensor[R@tp]) -> Tensor[R@tp]:
        return x


class Doubled(Layer):
    def forward(self, x):
        return x * 2


def run(layer: Doubled, h: Tensor[I@tp]) -> None:
    layer.forward(h)
