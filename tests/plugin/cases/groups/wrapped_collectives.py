"""A library's own wrapper of a torch.distributed collective ([spmd_mypy] collectives) is typed as torch's."""
from typing import Any, Optional

import torch
import torch.distributed as dist

from spmd_stubs import Group, P, R, S, Tensor
from spmd_stubs.axes import tp


def all_gather_into_tensor(output_tensor: torch.Tensor, input_tensor: torch.Tensor,
                           group: Optional[dist.ProcessGroup] = None, async_op: bool = False) -> Optional[dist.Work]:
    """nanotron.distributed's wrapper, as written there (asserts, then torch's collective)."""
    return dist.all_gather_into_tensor(output_tensor, input_tensor, group=group, async_op=async_op)


class Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, tensor: Tensor[S(0)@tp], group: Group[tp]) -> Tensor[R@tp]:
        unsharded_tensor = torch.empty(2 * tensor.shape[0], *tensor.shape[1:])
        all_gather_into_tensor(unsharded_tensor, tensor, group=group)
        return unsharded_tensor

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[P@tp]) -> tuple[Tensor[S(0)@tp], None]:
        return grad_output, None  # E: return-value got "tuple[Tensor[P@tp], None]"


def outside_a_function(x: Tensor[S(0)@tp], out: torch.Tensor, group: Group[tp]) -> None:
    all_gather_into_tensor(out, x, group=group)  # E: spmd-untyped-collective spmd_stubs.all_gather(x, tp, src=S(0), dst=R or I)
