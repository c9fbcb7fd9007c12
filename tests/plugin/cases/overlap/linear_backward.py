"""megatron-core's LinearWithGradAccumulationAndAsyncCommunication.backward, as written (its layouts chosen by
ctx.sequence_parallel and ctx.allreduce_dgrad): the input all-gathered into a buffer while grad_input is
computed, then grad_input all-reduced or reduce-scattered while the weight gradient is; each race beside it.
Last, the typed form: a Pending whose wait() is the typed result."""
import torch
import torch.distributed as dist

import spmd_stubs as spmd
from spmd_stubs import I, P, Tensor
from spmd_stubs.axes import tp

dist_all_gather_func = dist.all_gather_into_tensor
dist_reduce_scatter_func = dist.reduce_scatter_tensor


class Ctx:
    sequence_parallel: bool
    allreduce_dgrad: bool


def backward(ctx: Ctx, grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
             tp_group: dist.ProcessGroup, world_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    if ctx.sequence_parallel:
        dim_size = list(input.size())
        dim_size[0] = dim_size[0] * world_size
        all_gather_buffer = torch.empty(dim_size, dtype=input.dtype)
        handle = dist_all_gather_func(all_gather_buffer, input, group=tp_group, async_op=True)
        total_input = all_gather_buffer
    else:
        total_input = input
    grad_input = grad_output.matmul(weight)
    if ctx.sequence_parallel:
        handle.wait()
    if ctx.allreduce_dgrad:
        handle = dist.all_reduce(grad_input, group=tp_group, async_op=True)
    if ctx.sequence_parallel:
        assert not ctx.allreduce_dgrad
        dim_size = list(input.size())
        sub_grad_input = torch.empty(dim_size, dtype=input.dtype)
        handle = dist_reduce_scatter_func(sub_grad_input, grad_input, group=tp_group, async_op=True)
    grad_weight = grad_output.t().matmul(total_input)
    if ctx.sequence_parallel:
        handle.wait()
        return sub_grad_input, grad_weight
    if ctx.allreduce_dgrad:
        handle.wait()
    return grad_input, grad_weight


def wait_after_the_use(ctx: Ctx, grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
                       tp_group: dist.ProcessGroup, world_size: int) -> torch.Tensor:
    if ctx.sequence_parallel:
        all_gather_buffer = torch.empty(world_size * input.shape[0], input.shape[1])
        handle = dist_all_gather_func(all_gather_buffer, input, group=tp_group, async_op=True)
        total_input = all_gather_buffer
    else:
        total_input = input
    grad_weight = grad_output.t().matmul(total_input)  # E: spmd-async total_input is used while dist_all_gather_func
    if ctx.sequence_parallel:
        handle.wait()
    return grad_weight


def wait_removed(ctx: Ctx, grad_input: torch.Tensor, tp_group: dist.ProcessGroup) -> torch.Tensor:
    if ctx.allreduce_dgrad:
        handle = dist.all_reduce(grad_input, group=tp_group, async_op=True)
    grad_weight = grad_input.sum()  # E: spmd-async grad_input is used while all_reduce
    return grad_weight  # E: spmd-async returns while all_reduce


def returned_before_the_wait(grad_input: torch.Tensor, tp_group: dist.ProcessGroup) -> torch.Tensor:
    handle = dist.all_reduce(grad_input, group=tp_group, async_op=True)
    return grad_input  # E: spmd-async returns while all_reduce


def waited_on_one_branch(grad_input: torch.Tensor, tp_group: dist.ProcessGroup, last: bool) -> torch.Tensor:
    handle = dist.all_reduce(grad_input, group=tp_group, async_op=True)
    if last:
        handle.wait()
    return torch.zeros(1)  # E: spmd-async returns while all_reduce


def never_waited(grad_input: torch.Tensor, tp_group: dist.ProcessGroup, last: bool) -> None:
    handle = dist.all_reduce(grad_input, group=tp_group, async_op=True)  # E: spmd-async all_reduce on a group of unknown axis (async_op=True) is never waited on a path through this function (last=False)
    if last:
        handle.wait()


def handle_dropped(grad_input: torch.Tensor, tp_group: dist.ProcessGroup) -> None:
    dist.all_reduce(grad_input, group=tp_group, async_op=True)  # E: spmd-async the handle of all_reduce on a group of unknown axis (async_op=True) is dropped


def waited_before_the_use(grad_input: torch.Tensor, tp_group: dist.ProcessGroup) -> torch.Tensor:
    handle = dist.all_reduce(grad_input, group=tp_group, async_op=True)
    scale = torch.ones(1) * 2
    handle.wait()
    return grad_input * scale


def pending_never_waited(grad_input: Tensor[P@tp]) -> None:
    pending = spmd.all_reduce(grad_input, tp, src=P, dst=I, async_op=True)  # E: spmd-async all_reduce on axis tp (async_op=True) is never waited on a path through this function


def pending_waited(grad_input: Tensor[P@tp]) -> Tensor[I@tp]:
    pending = spmd.all_reduce(grad_input, tp, src=P, dst=I, async_op=True)
    scale = torch.ones(1) * 2
    reduced = pending.wait()
    reveal_type(reduced)  # N: Tensor[I@tp]
    return reduced * scale
