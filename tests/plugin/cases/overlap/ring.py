"""Ring attention's KV rotation (picotron's RingAttentionFunc, context parallel): each step attends to the KV
block this rank holds, then rotates it one rank ahead on cp, overlapped with the attention; the blocks stay
V@cp. A rotated shard is no longer in rank order: a V, not the S(1) it was."""
import torch

import spmd_stubs as spmd
from spmd_stubs import I, S, Tensor, V
from spmd_stubs.axes import cp


def attend(q: Tensor[V@cp], k: Tensor[V@cp], v: Tensor[V@cp]) -> Tensor[V@cp]:
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v


def ring_attention(q: Tensor[V@cp], k: Tensor[V@cp], v: Tensor[V@cp], world_size: int) -> Tensor[V@cp]:
    out = attend(q, k, v)
    for _ in range(world_size - 1):
        next_k = spmd.ring_shift(k, cp, async_op=True)
        next_v = spmd.ring_shift(v, cp, async_op=True)
        k, v = next_k.wait(), next_v.wait()
        out = out + attend(q, k, v)
    reveal_type(out)  # N: Tensor[V@cp]
    return out


def rotated_shard(k: Tensor[S(1)@cp], scale: Tensor[I@cp]) -> None:
    reveal_type(spmd.ring_shift(k, cp))  # N: Tensor[V@cp]
    reveal_type(spmd.ring_shift(scale, cp, offset=-1))  # N: Tensor[I@cp]


def rotation_never_waited(k: Tensor[V@cp]) -> None:
    rotated = spmd.ring_shift(k, cp, async_op=True)  # E: spmd-async ring_shift on axis cp (async_op=True) is never waited
