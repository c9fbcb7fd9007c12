"""Fixed: the batch sum of the router probabilities left pending (P@ep), so each rank's term is its share."""

import spmd_stubs as spmd
from spmd_stubs import P, R, Tensor, V
from spmd_stubs.axes import ep


def training_loss(share: Tensor[P@ep], probs: Tensor[V@ep], fraction: Tensor[R@ep], tokens: int) -> Tensor[P@ep]:
    """``share + E * sum_e fraction_e * mean_prob_e``; summed over ep, the whole batch's loss once."""
    mean_prob = spmd.reinterpret(probs.sum(dim=0) / tokens, ep, src=V, dst=P)
    return share + fraction.shape[0] * (fraction * mean_prob).sum()
