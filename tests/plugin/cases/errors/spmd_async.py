"""spmd-async: a raw collective started with async_op=True whose buffer is used, or whose function returns, before its handle's wait(), or whose handle is dropped or never waited on some path."""
import torch
import torch.distributed as dist


def wrong(x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    handle = dist.all_reduce(x, group=group, async_op=True)
    y = x * 2  # E: spmd-async x is used while all_reduce
    handle.wait()
    return y


def fixed(x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    handle = dist.all_reduce(x, group=group, async_op=True)
    handle.wait()
    return x * 2
