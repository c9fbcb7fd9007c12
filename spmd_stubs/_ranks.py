"""Rank-dependent local work: "keep my slice", "zero unless I am first".

Some casts (``convert(R,V)``, ``convert(R,P)``, ``convert(V,P)``) do no
communication but need this rank's index in the group.  In a real process
group that is ``dist.get_rank(group)``.  In the single-process simulated
world (``torch.distributed._local_tensor.LocalTensorMode``) one tensor holds
every rank's shard and the group object is rank 0's, so each simulated rank's
index is recovered from the group's layout, as LocalTensorMode's own
collectives do.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist
from torch.distributed._local_tensor import LocalTensor, enabled_local_tensor_mode
from torch.distributed._local_tensor._c10d import _prepare_collective_groups

__all__ = ["per_rank"]

LocalFn = Callable[[int, torch.Tensor], torch.Tensor]


def per_rank(x: torch.Tensor, group: dist.ProcessGroup, fn: LocalFn) -> torch.Tensor:
    """``fn(index of this rank in group, local tensor)`` on every rank."""
    mode = enabled_local_tensor_mode()
    if mode is None:
        return fn(dist.get_rank(group), x)
    index = _simulated_indices(group)
    if not isinstance(x, LocalTensor):
        # A plain tensor under the mode is the same on every simulated rank.
        return mode.rank_map(lambda r: fn(index[r], x))
    return mode.tensor_map(x, lambda r, local: fn(index[r], local))


def _simulated_indices(group: dist.ProcessGroup) -> dict[int, int]:
    """Global rank -> index in its own copy of ``group`` (all copies, all ranks)."""
    ranks, offsets, _ = _prepare_collective_groups(group)
    return {offset + rank: i for offset in offsets for i, rank in enumerate(ranks)}
