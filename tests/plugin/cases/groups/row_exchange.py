"""Megatron's _AllToAll (megatron-core 0.16.1, tensor_parallel/mappings.py), typed: the uneven exchange of tokens.

Its group comes in as an untyped parameter: followed to the declared
get_expert_model_parallel_group through the wrapper that applies it, past
its backward, which applies it again with ctx.group and the sizes swapped.
"""
from typing import Any, Optional

import torch
import torch.distributed as dist
from megatron.core import parallel_state  # type: ignore[import-untyped]

import spmd_stubs as spmd
from spmd_stubs import R, S, Tensor, V
from spmd_stubs.axes import ep


class _AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, group, input: Tensor[V@ep], output_split_sizes, input_split_sizes) -> Tensor[V@ep]:  # type: ignore[no-untyped-def]
        ctx.group = group
        ctx.output_split_sizes = output_split_sizes
        ctx.input_split_sizes = input_split_sizes
        world_size = group.size()
        if world_size == 1:
            return input
        input = input.contiguous()
        if output_split_sizes is None:
            output = torch.empty_like(input)
        else:
            output = input.new_empty(size=[sum(output_split_sizes)] + list(input.size()[1:]), dtype=input.dtype)
        torch.distributed.all_to_all_single(
            output, input, output_split_sizes=output_split_sizes, input_split_sizes=input_split_sizes, group=group,
        )
        reveal_type(output)  # N: Tensor[V@ep]
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[V@ep]) -> tuple[None, Tensor[V@ep], None, None]:
        return (None, _AllToAll.apply(ctx.group, grad_output, ctx.input_split_sizes, ctx.output_split_sizes), None, None)


def all_to_all(group, input_: Tensor[V@ep], output_split_sizes_=None, input_split_sizes=None) -> Tensor[V@ep]:  # type: ignore[no-untyped-def]
    assert group is not None, "group should not be None"
    return _AllToAll.apply(group, input_, output_split_sizes_, input_split_sizes)  # type: ignore[no-any-return]


def dispatch(tokens: Tensor[V@ep], received: list[int], sent: list[int]) -> None:
    reveal_type(all_to_all(parallel_state.get_expert_model_parallel_group(), tokens, received, sent))  # N: Tensor[V@ep]


class PositionalSizes(torch.autograd.Function):
    """The sizes passed by position, the group a declared function's: retyped all the same."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor[V@ep], received: list[int], sent: list[int]) -> Tensor[V@ep]:
        output = input_.new_empty((sum(received), input_.size(1)))
        dist.all_to_all_single(output, input_, received, sent, group=parallel_state.get_expert_model_parallel_group())
        reveal_type(output)  # N: Tensor[V@ep]
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[V@ep]) -> tuple[Tensor[V@ep], None, None]:
        return grad_output, None, None


def raw_dispatch(tokens: Tensor[V@ep], out: torch.Tensor, received: list[int], sent: list[int]) -> None:
    dist.all_to_all_single(out, tokens, received, sent, group=parallel_state.get_expert_model_parallel_group())  # E: spmd-untyped-collective Fix (needs your choice): use the typed spmd_stubs.all_to_all(x, ep, src=V, dst=V, input_split_sizes=..., output_split_sizes=...)


def raw_dispatch_fixed(tokens: Tensor[V@ep], received: list[int], sent: list[int]) -> None:
    routed = spmd.all_to_all(tokens, ep, src=V, dst=V, input_split_sizes=sent, output_split_sizes=received)
    reveal_type(routed)  # N: Tensor[V@ep]


def raw_even_dispatch(tokens: Tensor[V@ep], out: torch.Tensor) -> None:
    dist.all_to_all_single(out, tokens, group=parallel_state.get_expert_model_parallel_group())  # E: spmd-untyped-collective Fix (needs your choice): use the typed spmd_stubs.all_to_all(x, ep, src=V, dst=V).


def raw_dispatch_of_replicated_tokens(tokens: Tensor[R@ep], out: torch.Tensor, received: list[int], sent: list[int]) -> None:
    dist.all_to_all_single(out, tokens, received, sent, group=parallel_state.get_expert_model_parallel_group())  # E: spmd-untyped-collective x is R@ep: every rank of ep holds the same rows, so each would send its copy and every row would arrive once from each rank (and its gradient be summed as often); first convert(x, ep, src=R, dst=S(0)) to keep this rank's share of the rows


def raw_dispatch_of_replicated_tokens_fixed(tokens: Tensor[R@ep], received: list[int], sent: list[int]) -> None:
    share = spmd.convert(tokens, ep, src=R, dst=S(0))
    reveal_type(spmd.all_to_all(share, ep, src=V, dst=V, input_split_sizes=sent, output_split_sizes=received))  # N: Tensor[V@ep]
