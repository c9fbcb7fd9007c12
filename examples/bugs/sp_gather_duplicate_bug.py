"""Sequence-parallel output gathered with a reduce-scatter backward for duplicated work.

Megatron's ``gather_from_sequence_parallel_region`` defaults to
``tensor_parallel_output_grad=True`` (backward: reduce-scatter).  When every
tp rank then does the *same* computation on the gathered tensor, their
gradients are identical, and summing them multiplies the gradient by tp.
Reported: NVIDIA/Megatron-LM#7452 (its item on ``WanModel.forward`` in
Megatron-Bridge: "doubles the decoder's gradients under TP=2").  See docs/bugs.md.
"""

import spmd_stubs as spmd
from spmd_stubs import I, R, S, Tensor
from spmd_stubs.axes import tp


def output_head(x: Tensor[S(0)@tp], weight: Tensor[I@tp]) -> Tensor[I@tp]:
    """Gather the sequence and apply a head that every tp rank computes in full."""
    full = spmd.all_gather(x, tp, src=S(0), dst=R)
    return full @ weight.T  # E: spmd-invariant-mix
