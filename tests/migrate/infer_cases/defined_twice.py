"""Names that mean more than one definition: left as they are.

``_scaled`` is defined in both branches of an ``if`` (with different
parameters), and ``Layer.weight`` is a property with a setter: an
annotation is written by name, which names both.  ``self.weight = x`` calls
the setter (no attribute to declare), and ``self._w``, which the setter
assigns an untyped value, has no known type.  ``_doubled``, defined once,
is inferred as usual.
"""

import os

from torch import nn

from spmd_stubs import R, Tensor
from spmd_stubs.axes import tp

if os.environ.get("FAST_PATH"):
    def _scaled(x):
        return x * 2
else:
    def _scaled(y, factor=2):
        return y * factor


def _doubled(z):
    return z * 2


class Layer(nn.Module):
    def __init__(self, w: Tensor[R@tp]) -> None:
        super().__init__()
        self._w = w

    @property
    def weight(self):
        return self._w

    @weight.setter
    def weight(self, value):
        self._w = value

    def forward(self, x: Tensor[R@tp]) -> None:
        _scaled(x)
        _doubled(x)
        self.weight = x
