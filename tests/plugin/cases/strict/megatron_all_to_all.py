"""Strict: Megatron's _AllToAll with its group a declared function's, reached through calls of values.

megatron has no py.typed, so strict mode reads parallel_state.get_expert_model_parallel_group()
as a call of a value; the declared group is still named, so the raw all_to_all_single in the
body types its output instead of losing track of it.
"""
from typing import Any

import torch
import torch.distributed as dist
from megatron.core import parallel_state  # type: ignore[import-untyped]

from spmd_stubs import Tensor, V
from spmd_stubs.axes import ep


class _AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, group: Any, input: Tensor[V@ep], output_split_sizes: list[int], input_split_sizes: list[int]) -> Tensor[V@ep]:
        ctx.group = group
        ctx.output_split_sizes, ctx.input_split_sizes = output_split_sizes, input_split_sizes
        output = torch.empty((sum(output_split_sizes), input.size(1)))
        torch.distributed.all_to_all_single(output, input, output_split_sizes, input_split_sizes, group=group)
        reveal_type(output)  # N: Tensor[V@ep]
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[V@ep]) -> tuple[None, Tensor[V@ep], None, None]:
        return (None, _AllToAll.apply(ctx.group, grad_output, ctx.input_split_sizes, ctx.output_split_sizes), None, None)


def dispatch(tokens: Tensor[V@ep], received: list[int], sent: list[int]) -> Tensor[V@ep]:
    return _AllToAll.apply(parallel_state.get_expert_model_parallel_group(), tokens, received, sent)


class UndeclaredGroup(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, input: Tensor[V@ep], group: dist.ProcessGroup) -> Tensor[V@ep]:
        output = torch.empty(input.shape)
        dist.all_to_all_single(output, input, group=group)  # E: spmd-untyped-collective it implements this Function's transition on the group's axis, which the checker cannot tell from this group
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[V@ep]) -> tuple[Tensor[V@ep], None]:
        return grad_output, None


class UndeclaredGroupFixed(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, input: Tensor[V@ep]) -> Tensor[V@ep]:
        output = torch.empty(input.shape)
        dist.all_to_all_single(output, input, group=parallel_state.get_expert_model_parallel_group())
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[V@ep]) -> Tensor[V@ep]:
        return grad_output
