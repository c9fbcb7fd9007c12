"""spmd-autograd: an autograd Function's annotated backward is not the per-axis dual of its forward (R<->P, I, V, S(i))."""
from typing import Any

import torch

from spmd_stubs import I, P, R, Tensor, all_reduce, convert
from spmd_stubs.axes import tp


def wrong(x: Tensor[I@tp]) -> None:
    class CopyToTensorParallel(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Tensor[I@tp]) -> Tensor[R@tp]:
            return convert(x, tp, src=I, dst=R)

        @staticmethod
        def backward(ctx: Any, g: Tensor[R@tp]) -> Tensor[I@tp]:  # E: spmd-autograd parameter 1 (`g`) is R@tp on axis tp it is the gradient of forward's output 1, R@tp, whose dual is P@tp
            return convert(g, tp, src=R, dst=I, expert_mode=True)


def fixed(x: Tensor[I@tp]) -> None:
    class CopyToTensorParallel(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Tensor[I@tp]) -> Tensor[R@tp]:
            return convert(x, tp, src=I, dst=R)

        @staticmethod
        def backward(ctx: Any, g: Tensor[P@tp]) -> Tensor[I@tp]:
            return all_reduce(g, tp, src=P, dst=I)

    reveal_type(CopyToTensorParallel.apply(x))  # N: Tensor[R@tp]
