"""A column-parallel layer whose bias may be None: the helper that takes it gets an Optional parameter.

``self.bias`` is declared ``Optional[Tensor[S(0)@tp]]`` (no bias: None), and
``_with_bias`` takes ``bias=None`` by default; both parameters are written
``Tensor[...] | None``, and the other parameters of the same calls are kept
(a bias written without its ``| None`` would make mypy reject the call).
"""

from typing import Optional

import torch.nn.functional as F
from torch import nn

from spmd_stubs import R, S, Tensor
from spmd_stubs.axes import tp


def _project(x, bias):
    return F.linear(x, x, bias)


def _with_bias(y, bias=None):
    return y if bias is None else y + bias


def _doubled(y):
    return y * 2


class Column(nn.Module):
    bias: Optional[Tensor[S(0)@tp]]

    def forward(self, x: Tensor[R@tp], extra: Tensor[R@tp]) -> None:
        _doubled(x)
        _project(x, self.bias)
        _with_bias(x, extra)
