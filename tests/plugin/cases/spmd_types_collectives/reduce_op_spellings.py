"""A Function body's functional all_reduce reads its reduction as torchtitan's loss writes it
(``reduceOp=dist.ReduceOp.SUM.name``, the string ``"SUM"``): a sum is typed, any other reduction is not."""
from typing import Any

import spmd_types as spmd
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


@spmd.register_autograd_function
class SumOfShards(torch.autograd.Function):
    @staticmethod
    def typecheck_forward(partial: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        spmd.assert_type(partial, {group: spmd.P})
        result = SumOfShards.apply(partial, group)
        spmd.assert_type(result, {group: spmd.R})
        return result

    @staticmethod
    def forward(ctx: Any, partial: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        ctx.group = group
        reveal_type(funcol.all_reduce(partial, reduceOp=dist.ReduceOp.SUM.name, group=group))  # N: Tensor[R@group]
        reveal_type(funcol.all_reduce(partial, "sum", group))  # N: Tensor[R@group]
        reveal_type(funcol.all_reduce(partial, "SUM", group))  # N: Tensor[R@group]
        reveal_type(funcol.all_reduce(partial, reduceOp=dist.ReduceOp.MAX.name, group=group))  # N: Any
        return funcol.all_reduce(partial, reduceOp=dist.ReduceOp.SUM.name, group=group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return funcol.all_reduce(grad, reduceOp=dist.ReduceOp.SUM.name, group=ctx.group), None


@spmd.register_autograd_function
class SumForgotten(torch.autograd.Function):
    @staticmethod
    def typecheck_forward(partial: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        spmd.assert_type(partial, {group: spmd.P})
        result = SumForgotten.apply(partial, group)
        spmd.assert_type(result, {group: spmd.R})
        return result

    @staticmethod
    def forward(ctx: Any, partial: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        ctx.group = group
        return partial  # E: return-value got "Tensor[P@group]", expected "Tensor[R@group]"

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return funcol.all_reduce(grad, reduceOp=dist.ReduceOp.SUM.name, group=ctx.group), None
