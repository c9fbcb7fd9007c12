"""Point-to-point transfers in flight, in picotron's shapes (pp_communications' pipeline_communicate,
cp_communications' ContextCommunicate.send_recv/commit/wait): a received buffer read before its wait, the
batch's handles never waited; the fixed twins."""
import torch
import torch.distributed as dist


def recv_forward(shape: tuple[int, ...], prev_rank: int, group: dist.ProcessGroup) -> torch.Tensor:
    tensor = torch.empty(shape, requires_grad=True)
    request = dist.irecv(tensor, src=prev_rank, group=group)
    assert request is not None
    request.wait()
    return tensor


def recv_forward_read_early(shape: tuple[int, ...], prev_rank: int, group: dist.ProcessGroup) -> torch.Tensor:
    tensor = torch.empty(shape)
    request = dist.irecv(tensor, src=prev_rank, group=group)
    assert request is not None
    scaled = tensor * 2  # E: spmd-async tensor is used while irecv
    request.wait()
    return scaled


def send_forward(tensor: torch.Tensor, next_rank: int, group: dist.ProcessGroup) -> torch.Tensor:
    request = dist.isend(tensor, dst=next_rank, group=group)
    kept = tensor.detach()  # reading what is being sent is fine
    assert request is not None
    request.wait()
    return kept


def ring_step(tensor: torch.Tensor, send_rank: int, recv_rank: int, group: dist.ProcessGroup) -> torch.Tensor:
    result = torch.zeros_like(tensor)
    ops = [dist.P2POp(dist.isend, tensor, send_rank, group=group),
           dist.P2POp(dist.irecv, result, recv_rank, group=group)]
    requests = dist.batch_isend_irecv(ops)
    for request in requests:
        request.wait()
    return result


def ring_step_never_waited(tensor: torch.Tensor, send_rank: int, recv_rank: int, group: dist.ProcessGroup) -> None:
    result = torch.zeros_like(tensor)
    ops = [dist.P2POp(dist.isend, tensor, send_rank, group=group),
           dist.P2POp(dist.irecv, result, recv_rank, group=group)]
    requests = dist.batch_isend_irecv(ops)  # E: spmd-async batch_isend_irecv on a group of unknown axis is never waited
