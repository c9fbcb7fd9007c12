"""Strict: a Function body's raw collective over a group that names no axis is reported where it is."""
from typing import Any

import torch
import torch.distributed as dist

from spmd_stubs import Group, I, P, R, Tensor
from spmd_stubs.axes import tp


class ReduceFromRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, input_: Tensor[P@tp], group: dist.ProcessGroup) -> Tensor[I@tp]:
        dist.all_reduce(input_, group=group)  # E: spmd-untyped-collective which the checker cannot tell from this group, so the tensor keeps the type it had before it. Fix (needs your choice): type the group where it comes in (`group: spmd_stubs.Group[AXIS]`
        return input_  # E: return-value

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[I@tp]) -> tuple[Tensor[R@tp], None]:
        return grad_output, None


class Typed(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, input_: Tensor[P@tp], group: Group[tp]) -> Tensor[I@tp]:
        dist.all_reduce(input_, group=group)
        return input_

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[I@tp]) -> tuple[Tensor[R@tp], None]:
        return grad_output, None
