"""Context-parallel loss reduced with a self-dual all-reduce before backward().

Each cp rank holds the losses of its sequence chunk.  Reducing them with
``all_reduce(dst=R)`` gives every rank the right value, but R's backward
all-reduces again: every gradient comes out ``cp`` times too large (the
``* cp_size`` / ``/ cp_size`` confusion of the reports).
Reported: NVIDIA/Megatron-LM#673 and #906.  See docs/bugs.md.
"""

import spmd_stubs as spmd
from spmd_stubs import P, R, S, Tensor, V
from spmd_stubs.axes import cp


def context_parallel_loss(token_losses: Tensor[S(0)@cp], total_tokens: int) -> Tensor[R@cp]:
    """Mean loss over the whole sequence, from this rank's chunk of per-token losses."""
    local = spmd.reinterpret(token_losses.sum(), cp, src=V, dst=P)
    return spmd.all_reduce(local, cp, src=P, dst=R) / total_tokens


def backward_step(token_losses: Tensor[S(0)@cp], total_tokens: int) -> None:
    loss = context_parallel_loss(token_losses, total_tokens)
    loss.backward()  # E: spmd-backward
