"""Fixed: the local sums of log-probabilities are parts of one sum over the vocabulary."""

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import tp


def smoothed_cross_entropy(
    logits: Tensor[S(-1)@tp], log_z: Tensor[I@tp], target_logit: Tensor[I@tp], vocab_size: int, smoothing: float
) -> Tensor[I@tp]:
    """Per-token ``(1 - s) * nll + s * mean_v(-log p_v)``; ``log_z`` is the global logsumexp."""
    log_probs = logits - spmd.convert(log_z, tp, src=I, dst=R).unsqueeze(-1)
    local_sum = spmd.reinterpret(log_probs.sum(dim=-1), tp, src=V, dst=P)
    mean_log_prob = spmd.all_reduce(local_sum, tp, src=P, dst=I) / vocab_size
    return (1 - smoothing) * (log_z - target_logit) - smoothing * mean_log_prob
