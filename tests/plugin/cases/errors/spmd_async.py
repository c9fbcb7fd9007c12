"""spmd-async: a raw collective started with async_op=True whose buffer is used, or whose function returns, before its handle's wait(), or whose handle is dropped or never waited on some path."""
import torch
import torch.distributed as dist

import spmd_stubs as spmd
from spmd_stubs.axes import tp


def wrong(x: torch.Tensor) -> torch.Tensor:
    handle = dist.all_reduce(x, group=spmd.group_of(tp), async_op=True)
    y = x * 2  # E: spmd-async x is used while all_reduce on axis tp
    handle.wait()
    return y


def fixed(x: torch.Tensor) -> torch.Tensor:
    handle = dist.all_reduce(x, group=spmd.group_of(tp), async_op=True)
    handle.wait()
    return x * 2
