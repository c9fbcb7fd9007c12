"""Expert-parallel token dispatch with a raw, non-differentiable all_to_all.

``all_to_all_single`` writes into a fresh buffer that autograd knows nothing
about: the experts' outputs get gradients, the tokens (and everything
before the MoE layer: router, attention) get none.
Fixed upstream by adding a backward: facebookresearch/fairscale#137.  See docs/bugs.md.
"""

import torch
import torch.distributed as dist

import spmd_stubs as spmd
from spmd_stubs import S, Tensor
from spmd_stubs.axes import ep


def dispatch(tokens: Tensor[S(0)@ep]) -> Tensor[S(0)@ep]:
    """Send chunk j of this rank's tokens to expert rank j; receive one chunk from each rank."""
    routed = torch.empty_like(tokens)
    dist.all_to_all_single(routed, tokens, group=spmd.group_of(ep))  # E: spmd-untyped-collective
    return routed
