"""Fixed: all_reduce(P, I) completes the embedding before the norm."""

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
    embedded = spmd.all_reduce(spmd.reinterpret(rows, tp, src=V, dst=P), tp, src=P, dst=I)
    return F.layer_norm(embedded, embedded.shape[-1:], weight, bias)
