"""Strict mode names the in-flight handles the checker does not follow (megatron's bucketed gradient reduction:
a flag for async_op, the handle kept in an attribute) instead of trusting them silently."""
import torch
import torch.distributed as dist


class Bucket:
    def __init__(self, grad_data: torch.Tensor, group: dist.ProcessGroup) -> None:
        self.grad_data, self.group = grad_data, group
        self.grad_reduce_handle: dist.Work | None = None

    def start_grad_sync(self, overlap: bool) -> None:
        dist.all_reduce(self.grad_data, group=self.group, async_op=overlap)  # E: spmd-async whether all_reduce on a group of unknown axis (async_op=...) is in flight depends on a value the checker does not know

    def start_kept(self) -> None:
        self.grad_reduce_handle = dist.all_reduce(self.grad_data, group=self.group, async_op=True)  # E: spmd-async the handle of all_reduce on a group of unknown axis (async_op=True) is stored where the checker does not follow it
