"""Ring attention: context-parallel attention with the KV blocks rotating around ``cp``.

The sequence is split over ``cp`` in contiguous chunks: rank ``r`` holds the
``r``-th chunk of the queries, keys and values (``[batch, heads, chunk,
head_dim]``).  Each of the ``n`` steps attends this rank's queries to the KV
block it holds now and folds the result into the running online-softmax
statistics (the running max and log-sum-exp, as picotron's
``update_out_and_lse``); meanwhile, except at the last step, that block
travels one rank ahead on the ring (``spmd.ring_shift(..., async_op=True)``,
overlapped with the attention), and the step waits for it before the next.
After ``n`` steps every rank has attended to every chunk, and its output is
its chunk of the attention over the whole sequence.

The blocks are typed ``V@cp``: a rotated chunk is no longer in rank order,
so a shard ``S(2)`` becomes a ``V`` at the first step (docs/spec.md, "Ring
steps").  The backward is autograd's: ``ring_shift``'s backward shifts the
gradient of a block back to the rank it came from, so the gradients of
``k`` and ``v`` arrive, summed over the steps, at the rank that holds the
chunk; no hand-written backward.

``mypy --config-file examples/mypy.ini examples/ring_attention/`` checks it
clean; tests/examples/test_ring_attention.py runs it on 4 gloo ranks (``cp`` =
4, and 2 dp x 2 ``cp``) against ``torch.softmax`` attention over the whole
sequence in one process: the output and the gradients of each rank's q, k
and v chunks agree to 1e-12 (float64).
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

import spmd_stubs as spmd
from spmd_stubs import Tensor, V
from spmd_stubs.axes import cp


def _attend_block(q: Tensor[V@cp], k: Tensor[V@cp], v: Tensor[V@cp]) -> tuple[Tensor[V@cp], Tensor[V@cp]]:
    """Softmax attention of ``q`` to one KV block: its output and log-sum-exp (``[..., chunk, 1]``)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    lse = torch.logsumexp(scores, dim=-1, keepdim=True)  # the block's max is inside: it stays finite
    return torch.exp(scores - lse) @ v, lse


def _merge(
    out: Tensor[V@cp], lse: Tensor[V@cp], block_out: Tensor[V@cp], block_lse: Tensor[V@cp]
) -> tuple[Tensor[V@cp], Tensor[V@cp]]:
    """Fold one block's output into the running output: both are softmax averages, reweighted by their sums.

    picotron's ``update_out_and_lse`` (``out - sigmoid(block_lse - lse) * (out
    - block_out)``) written with the running max, which also takes the empty
    start (``lse = -inf``: weight 0, where the sigmoid form gives ``-inf - -inf``).
    """
    new_max = torch.maximum(lse, block_lse)
    new_lse = new_max + torch.log(torch.exp(lse - new_max) + torch.exp(block_lse - new_max))
    return torch.exp(lse - new_lse) * out + torch.exp(block_lse - new_lse) * block_out, new_lse


def ring_attention(q: Tensor[V@cp], k: Tensor[V@cp], v: Tensor[V@cp]) -> Tensor[V@cp]:
    """This rank's chunk of ``softmax(q k^T / sqrt(d)) v`` over the whole sequence (no causal mask).

    At step ``s`` rank ``r`` holds the KV chunk of rank ``r - s`` (mod ``n``).
    Every rank attends to every block it receives, so every rank runs the
    same rotations backward: a causal variant that skipped the blocks after
    its own would leave those rotations out of its autograd graph, and the
    other ranks' backward shifts would wait for it forever.
    """
    size = dist.get_world_size(spmd.group_of(cp))
    # Nothing attended yet.  A fill stored in a variable has no SPMD type (docs/spec.md): the
    # annotations give the running statistics the type of the blocks folded into them.
    out: Tensor[V@cp] = torch.zeros_like(q)
    lse: Tensor[V@cp] = torch.full_like(q[..., :1], float("-inf"))
    for _ in range(size - 1):
        next_k = spmd.ring_shift(k, cp, async_op=True)  # the next step's block, in flight during this one
        next_v = spmd.ring_shift(v, cp, async_op=True)
        out, lse = _merge(out, lse, *_attend_block(q, k, v))  # overlapped with the rotation
        k, v = next_k.wait(), next_v.wait()
    out, lse = _merge(out, lse, *_attend_block(q, k, v))
    return out
