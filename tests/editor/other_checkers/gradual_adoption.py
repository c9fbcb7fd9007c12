"""A module half-way through adopting SPMD types, in the canonical spelling.

Every value a typed annotation receives here comes from untyped code: a plain
``torch.Tensor``, an ``nn.Parameter``, a torch op's or a collective's result.
mypy with the plugin reads them as ``Tensor[Any]`` (unknown, accepted); the
other type checkers read ``Tensor[...]`` as ``torch.Tensor``.  No checker may
report an error on it.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

import spmd_stubs as spmd
from spmd_stubs import I, P, R, Sharded, Tensor, V
from spmd_stubs.axes import dp, tp


def column(x: Tensor[R[tp]], weight: Tensor[Sharded[Literal[0], tp]]) -> Tensor[Sharded[Literal[-1], tp]]:
    return F.linear(x, weight)


def row(h: Tensor[Sharded[Literal[-1], tp]], weight: Tensor[Sharded[Literal[1], tp]]) -> Tensor[P[tp]]:
    return spmd.reinterpret(F.linear(h, weight), tp, src=V, dst=P)


def loss(logits: Tensor[V[dp], I[tp]]) -> Tensor[V[dp], I[tp]]:
    return logits.float().mean()


class Block(nn.Module):
    """Parameters and buffers of an untyped module, passed to typed functions."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.up = nn.Parameter(torch.empty(hidden, hidden))
        self.down = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        entered: Tensor[R[tp]] = spmd.convert(x, tp, src=I, dst=R)
        hidden = column(entered, self.up)
        partial = row(torch.relu(hidden), self.down.weight)
        reduced: Tensor[I[tp]] = spmd.all_reduce(partial, tp, src=P, dst=I)
        return reduced


def step(block: Block, batch: torch.Tensor) -> Tensor[V[dp], I[tp]]:
    out: Tensor[I[tp]] = block(batch)
    return loss(out * 2.0)
