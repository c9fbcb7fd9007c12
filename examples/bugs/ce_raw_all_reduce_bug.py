"""Target-token logit of vocab-parallel logits, summed with a raw torch.distributed.all_reduce.

The forward value is right, but the in-place c10d all-reduce is invisible to
autograd: the rank that owns the target gets the gradient, the others'
contributions are lost.
Reported: modelscope/ms-swift#9947.  See docs/bugs.md.
"""

import torch
import torch.distributed as dist

import spmd_stubs as spmd
from spmd_stubs import I, P, S, Tensor, V
from spmd_stubs.axes import tp


def target_logit(logits: Tensor[S(-1)@tp], targets: Tensor[I@tp], vocab_start: int) -> Tensor[P@tp]:
    """The logit of each token's target; only the owner of the target's vocab slice has it."""
    outside = (targets < vocab_start) | (targets >= vocab_start + logits.shape[-1])
    local_ids = torch.where(outside, 0, targets - vocab_start)
    picked = logits.gather(-1, local_ids.unsqueeze(-1)).squeeze(-1).masked_fill(outside, 0.0)
    summed = spmd.reinterpret(picked, tp, src=V, dst=P)
    dist.all_reduce(summed, group=spmd.group_of(tp))  # E: spmd-untyped-collective
    return summed
