"""Load-balancing loss from all-reduced router statistics, added to each expert-parallel rank's share of the loss.

Each ep rank routes its own tokens and holds its share of the main loss
(P@ep: the global loss is the sum over ep).  All-reducing the mean router
probability makes every rank compute the whole load-balancing loss and add
it to its share: summed over ep it counts ep times, and so do the router's
gradients.  See docs/bugs.md.
"""

import spmd_stubs as spmd
from spmd_stubs import P, R, Tensor, V
from spmd_stubs.axes import ep


def training_loss(share: Tensor[P@ep], probs: Tensor[V@ep], fraction: Tensor[R@ep], tokens: int) -> Tensor[P@ep]:
    """``share + E * sum_e fraction_e * mean_prob_e`` for this rank's router probabilities ``[tokens_r, E]``.

    ``fraction``: each expert's fraction of all routed copies (all-reduced
    counts, no gradient); ``tokens``: the batch size over every ep rank.
    """
    mean_prob = spmd.all_reduce(probs.sum(dim=0) / tokens, ep, src=P, dst=R)
    return share + fraction.shape[0] * (fraction * mean_prob).sum()  # E: spmd-partial-affine
