"""assert_type types anything: an untyped call's result, an autograd Function's .apply (mypy: Any)."""
from typing import Any

import torch

import spmd_stubs as spmd
from spmd_stubs import I, Tensor, V
from spmd_stubs.axes import dp, tp


class Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x


def untyped(x):  # type: ignore[no-untyped-def]
    return x


def refined(x: torch.Tensor, anything: Any, w: Tensor[I@tp]) -> None:
    y = spmd.assert_type(Identity.apply(x), V@dp)
    reveal_type(y)  # N: Tensor[V@dp]
    reveal_type(spmd.assert_type(untyped(x), V@dp, I@tp))  # N: Tensor[V@dp, I@tp]
    z = spmd.assert_type(anything, V@tp)
    z * w  # E: spmd-invariant-mix
