"""Vocab-parallel embedding whose partial output is used before the all-reduce.

Each tp rank holds the rows of its vocab slice and zeros elsewhere; the
embedding is their *sum*.  Normalising a rank's part alone normalises the
wrong vector (``norm(a + b) != norm(a) + norm(b)``).
No public bug report found for this exact omission; the pattern is Megatron's
``VocabParallelEmbedding.forward`` (reduce_from_tensor_model_parallel_region,
discussed in NVIDIA/Megatron-LM#926).  See docs/bugs.md.
"""

import torch
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import I, P, S, Tensor, V
from spmd_stubs.axes import tp


def embed_and_norm(
    tokens: Tensor[I@tp], table: Tensor[S(0)@tp], vocab_start: int, weight: Tensor[I@tp], bias: Tensor[I@tp]
) -> Tensor[I@tp]:
    """Embedding lookup followed by the first block's LayerNorm."""
    outside = (tokens < vocab_start) | (tokens >= vocab_start + table.shape[0])
    rows = F.embedding(torch.where(outside, 0, tokens - vocab_start), table).masked_fill(outside.unsqueeze(-1), 0.0)
    embedded = spmd.reinterpret(rows, tp, src=V, dst=P)
    return F.layer_norm(embedded, embedded.shape[-1:], weight, bias)  # E: spmd-partial-nonlinear
