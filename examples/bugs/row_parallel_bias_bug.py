"""Row-parallel linear that adds its bias before the all-reduce.

Every rank adds the same bias to its part of the sum, so the reduced output
carries ``tp * bias`` and the bias gradient is ``tp`` times too large.
Reported: huggingface/text-generation-inference#1036, awslabs/slapo#10,
GeeeekExplorer/nano-vllm#99; fixed in PaddlePaddle/Paddle#35186.  See docs/bugs.md.
"""

import spmd_stubs as spmd
from spmd_stubs import I, P, S, Tensor, V
from spmd_stubs.axes import tp


def row_parallel_linear(x: Tensor[S(-1)@tp], weight: Tensor[S(1)@tp], bias: Tensor[I@tp]) -> Tensor[I@tp]:
    """``x @ W.T + b`` with the contraction dim split over tp."""
    partial = spmd.reinterpret(x @ weight.T, tp, src=V, dst=P)
    return spmd.all_reduce(partial + bias, tp, src=P, dst=I)  # E: spmd-invariant-mix
