"""Fixed: gather with dst=R, whose backward reduce-scatters the experts' gradients."""

import spmd_stubs as spmd
from spmd_stubs import P, R, S, Tensor, V
from spmd_stubs.axes import ep


def local_experts(x: Tensor[S(0)@ep], expert_weight: Tensor[V@ep]) -> Tensor[S(0)@ep]:
    """All tokens through this rank's expert, summed over experts, back to this rank's tokens."""
    tokens = spmd.all_gather(x, ep, src=S(0), dst=R)
    partial = spmd.reinterpret(tokens @ expert_weight.T, ep, src=V, dst=P)
    return spmd.reduce_scatter(partial, ep, src=P, dst=S(0))
