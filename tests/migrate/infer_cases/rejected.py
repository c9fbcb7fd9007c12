"""A subclass whose unannotated ``forward`` is called with another type than its base declares.

The only call passes ``I@tp``, so the naive annotation is ``x: Tensor[I@tp]``;
mypy then rejects the override (the base's ``forward`` takes ``R@tp``).
"""

from torch import nn

from spmd_stubs import I, R, Tensor
from spmd_stubs.axes import tp


class Layer(nn.Module):
    def forward(self, x: Tensor[R@tp]) -> Tensor[R@tp]:
        return x


class Doubled(Layer):
    def forward(self, x):
        return x * 2


def run(layer: Doubled, h: Tensor[I@tp]) -> None:
    layer.forward(h)
