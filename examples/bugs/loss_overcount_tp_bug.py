"""Loss summed over the tensor-parallel ranks although every tp rank holds the same loss.

The loss of a vocab-parallel cross entropy is already the same on every tp
rank (I@tp).  Reducing it over the data *and* tensor-parallel ranks, as if
each rank held a different part, counts it tp times (and so its gradients).
Reported: huggingface/transformers#45994 ("loss over-counting under TP").  See docs/bugs.md.
"""

import spmd_stubs as spmd
from spmd_stubs import I, P, Tensor
from spmd_stubs.axes import tp


def model_parallel_loss(loss: Tensor[I@tp]) -> Tensor[I@tp]:
    """The loss every tp rank reports and backpropagates."""
    return spmd.all_reduce(loss, tp, src=P, dst=I)  # E: spmd-collective
