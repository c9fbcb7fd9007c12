"""Tokens all-gathered for expert-parallel experts with a slicing backward.

Each ep rank runs *every* token through its own experts, so each token's
gradient is a sum over the ranks' experts.  Gathering with an invariant
result (DTensor ``full_tensor()`` with Replicate grad placements, Megatron's
``tensor_parallel_output_grad=False``) makes the backward a slice: the other
ranks' experts' contributions are dropped.
Reported: NVIDIA-NeMo/Automodel#1260; the same class in pytorch/torchtitan#1805
(fixed by pytorch/torchtitan#1878).  See docs/bugs.md.
"""

import spmd_stubs as spmd
from spmd_stubs import I, P, S, Tensor, V
from spmd_stubs.axes import ep


def local_experts(x: Tensor[S(0)@ep], expert_weight: Tensor[V@ep]) -> Tensor[S(0)@ep]:
    """All tokens through this rank's expert, summed over experts, back to this rank's tokens."""
    tokens = spmd.all_gather(x, ep, src=S(0), dst=I)
    partial = spmd.reinterpret(tokens @ expert_weight.T, ep, src=V, dst=P)  # E: spmd-invariant-mix
    return spmd.reduce_scatter(partial, ep, src=P, dst=S(0))
