"""Sequence-parallel LayerNorm whose weight gradient is never all-reduced over tp.

With sequence parallelism each tp rank normalises a different slice of the
sequence, so each gets only its tokens' part of the weight gradient.  Used
as is, the shared weight drifts apart across tp ranks.
Reported: NVIDIA/Megatron-LM#1446, NVIDIA/TransformerEngine#435; the hook
added by EleutherAI/gpt-neox#1257.  See docs/bugs.md.
"""

import torch.nn.functional as F

from spmd_stubs import I, S, Tensor
from spmd_stubs.axes import tp


def sp_layer_norm(x: Tensor[S(0)@tp], weight: Tensor[I@tp], bias: Tensor[I@tp]) -> Tensor[S(0)@tp]:
    """LayerNorm of this rank's sequence slice."""
    return F.layer_norm(x, x.shape[-1:], weight, bias)  # E: spmd-invariant-mix
