"""On an axis of one rank every SPMD type is the same value: the bypasses real code writes are correct."""
from typing import Any, Optional

import torch
import torch.distributed as dist
from megatron.core.parallel_state import get_tensor_model_parallel_world_size  # type: ignore[import-untyped]

from spmd_stubs import Group, I, P, R, Tensor
from spmd_stubs.axes import dp, tp


class ProcessGroupManager:
    tp_group: dist.ProcessGroup
    tp_world_size: int
    pipeline_width: int


pgm = ProcessGroupManager()


class Copy(torch.autograd.Function):
    """picotron's CopyToModelParallelRegion: the size named for its axis."""

    @staticmethod
    def forward(ctx: Any, x: Tensor[I@tp]) -> Tensor[R@tp]:
        return x

    @staticmethod
    def backward(ctx: Any, x: Tensor[P@tp]) -> Tensor[I@tp]:
        if pgm.tp_world_size == 1:
            return x
        dist.all_reduce(x, group=pgm.tp_group)
        return x


class Reduce(torch.autograd.Function):
    """nanotron's DifferentiableAllReduceSum: the size of the group the collective uses."""

    @staticmethod
    def forward(ctx: Any, tensor: Tensor[P@tp], group: Optional[Group[tp]]) -> Tensor[I@tp]:
        if group is not None and group.size() == 1:
            return tensor
        dist.all_reduce(tensor, group=group)
        return tensor

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[I@tp]) -> tuple[Tensor[R@tp], None]:
        return grad_output, None


def megatron_reduce(input_: Tensor[P@tp]) -> Tensor[I@tp]:
    """megatron's _reduce: a declared size helper ([spmd_mypy] sizes), its result kept in a local."""
    world_size = get_tensor_model_parallel_world_size()
    if world_size == 1:
        return input_
    return input_  # E: return-value got "Tensor[P@tp]", expected "Tensor[I@tp]"


def more_than_one(x: Tensor[P@tp], group: Group[tp]) -> Tensor[I@tp]:
    if dist.get_world_size(group) > 1:
        return x  # E: return-value got "Tensor[P@tp]", expected "Tensor[I@tp]"
    else:
        return x


def two_ranks_is_not_one(x: Tensor[P@tp], group: Group[tp]) -> Tensor[I@tp]:
    if group.size() == 2:
        return x  # E: return-value got "Tensor[P@tp]", expected "Tensor[I@tp]"
    return x  # E: return-value got "Tensor[P@tp]", expected "Tensor[I@tp]"


def another_axis_of_size_one(x: Tensor[P@tp, P@dp], group: Group[dp]) -> Tensor[I@tp, I@dp]:
    if group.size() == 1:
        return x  # E: return-value got "Tensor[P@tp, I@dp]", expected "Tensor[I@dp, I@tp]"
    return x  # E: return-value


def a_size_not_named_for_the_axis(x: Tensor[P@tp]) -> Tensor[I@tp]:
    if pgm.pipeline_width == 1:
        return x  # E: return-value got "Tensor[P@tp]", expected "Tensor[I@tp]"
    return x  # E: return-value
