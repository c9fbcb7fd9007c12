"""Fixed: the typed all_reduce(P, I) is differentiable (backward: identity on every rank)."""

import torch

import spmd_stubs as spmd
from spmd_stubs import I, P, S, Tensor, V
from spmd_stubs.axes import tp


def target_logit(logits: Tensor[S(-1)@tp], targets: Tensor[I@tp], vocab_start: int) -> Tensor[I@tp]:
    """The logit of each token's target; only the owner of the target's vocab slice has it."""
    outside = (targets < vocab_start) | (targets >= vocab_start + logits.shape[-1])
    local_ids = torch.where(outside, 0, targets - vocab_start)
    picked = logits.gather(-1, local_ids.unsqueeze(-1)).squeeze(-1).masked_fill(outside, 0.0)
    return spmd.all_reduce(spmd.reinterpret(picked, tp, src=V, dst=P), tp, src=P, dst=I)
