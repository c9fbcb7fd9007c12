"""Global gradient norm that counts tp-duplicated parameters once per tp rank.

The squared norms of sharded gradients are parts of one sum over tp; those
of duplicated (same on every tp rank) parameters are not, yet both go into
the same all-reduce: the duplicated ones are counted ``tp`` times and
gradient clipping uses an inflated norm.
Reported: NVIDIA-NeMo/RL#3788, ROCm/TransformerEngine#715,
meta-pytorch/torchtune#2420.  See docs/bugs.md.
"""

import spmd_stubs as spmd
from spmd_stubs import I, P, S, Tensor, V
from spmd_stubs.axes import tp


def global_grad_norm(sharded_grad: Tensor[S(0)@tp], duplicated_grad: Tensor[I@tp]) -> Tensor[I@tp]:
    """L2 norm of the gradients of one tp-sharded and one tp-duplicated parameter."""
    squares = spmd.reinterpret(sharded_grad.pow(2).sum(), tp, src=V, dst=P)
    squares = squares + duplicated_grad.pow(2).sum()  # E: spmd-invariant-mix
    return spmd.all_reduce(squares, tp, src=P, dst=I).sqrt()
