"""Transfers in flight in megatron-core's shapes (pipeline_parallel/p2p_communication.py): the handles
returned to the caller with the batch (``_batched_p2p_ops``), or stored in a dict (``_p2p_ops``), are the
caller's to wait; returning only the received buffer, with its handle lost, is the race."""
from typing import Optional

import torch
import torch.distributed as dist


def batched_p2p_ops(tensor_send_next: Optional[torch.Tensor], tensor_recv_prev: Optional[torch.Tensor],
                    group: dist.ProcessGroup, prev_rank: int, next_rank: int) -> list[dist.Work]:
    ops = []
    if tensor_send_next is not None:
        ops.append(dist.P2POp(dist.isend, tensor_send_next, next_rank, group))
    if tensor_recv_prev is not None:
        ops.append(dist.P2POp(dist.irecv, tensor_recv_prev, prev_rank, group))
    if len(ops) > 0:
        reqs = dist.batch_isend_irecv(ops)
    else:
        reqs = []
    return reqs


def p2p_ops(tensor_recv_prev: Optional[torch.Tensor], group: dist.ProcessGroup,
            prev_rank: int) -> dict[str, Optional[dist.Work]]:
    reqs = {}
    if tensor_recv_prev is not None:
        recv_prev_req = dist.irecv(tensor=tensor_recv_prev, src=prev_rank, group=group)
        reqs["recv_prev"] = recv_prev_req
    return reqs


def recv_prev_with_handle(shape: tuple[int, ...], group: dist.ProcessGroup,
                          prev_rank: int) -> tuple[torch.Tensor, Optional[dist.Work]]:
    tensor_recv_prev = torch.empty(shape)
    recv_prev_req = dist.irecv(tensor_recv_prev, src=prev_rank, group=group)
    return tensor_recv_prev, recv_prev_req


def recv_prev_handle_lost(shape: tuple[int, ...], group: dist.ProcessGroup, prev_rank: int) -> torch.Tensor:
    tensor_recv_prev = torch.empty(shape)
    recv_prev_req = dist.irecv(tensor_recv_prev, src=prev_rank, group=group)
    assert recv_prev_req is not None
    return tensor_recv_prev  # E: spmd-async returns while irecv


def nanotron_column_linear_backward(grad_output: torch.Tensor, tensor: torch.Tensor, weight: torch.Tensor,
                                    group: dist.ProcessGroup, gather: bool) -> torch.Tensor:
    """nanotron's column-linear backward: the handle tested against None before its wait."""
    handle: dist.Work | None = None
    if gather:
        unsharded_tensor = torch.empty(tensor.shape[0] * group.size(), *tensor.shape[1:])
        handle = dist.all_gather_into_tensor(unsharded_tensor, tensor, group=group, async_op=True)
        total_tensor = unsharded_tensor
    else:
        total_tensor = tensor
    grad_tensor = grad_output.matmul(weight)
    if handle is not None:
        handle.wait()
    return grad_output.t().matmul(total_tensor) + grad_tensor.sum()
