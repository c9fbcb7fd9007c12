"""Vocab-parallel cross entropy with label smoothing averaged over the local vocab slice.

The smoothing term needs the mean log-probability over the *whole*
vocabulary; each rank averages only its slice, so the loss differs per tp
rank and its gradient is wrong.
Reported: NVIDIA/Megatron-LM#737 and #7464 (fix proposed in #5522, #7466).  See docs/bugs.md.
"""

import spmd_stubs as spmd
from spmd_stubs import I, R, S, Tensor
from spmd_stubs.axes import tp


def smoothed_cross_entropy(
    logits: Tensor[S(-1)@tp], log_z: Tensor[I@tp], target_logit: Tensor[I@tp], vocab_size: int, smoothing: float
) -> Tensor[I@tp]:
    """Per-token ``(1 - s) * nll + s * mean_v(-log p_v)``; ``log_z`` is the global logsumexp."""
    log_probs = logits - spmd.convert(log_z, tp, src=I, dst=R).unsqueeze(-1)
    mean_log_prob = log_probs.mean(dim=-1)
    return (1 - smoothing) * (log_z - target_logit) - smoothing * mean_log_prob  # E: spmd-invariant-mix
