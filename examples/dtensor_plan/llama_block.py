"""A llama-style transformer block in plain torch: no parallelism, no SPMD types.

``h = x + attention(attention_norm(x))``, ``out = h + feed_forward(ffn_norm(h))``
on ``[batch, seq, dim]`` activations, with the module names torchtitan's
llama uses, so that its tensor-parallel plan (:mod:`tp_plan`) applies as
written.  The attention reshapes by its own ``n_heads``: the plan sets it to
the heads one rank holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class ModelArgs:
    dim: int = 16
    n_heads: int = 4
    hidden_dim: int = 32
    norm_eps: float = 1e-5


class Attention(nn.Module):
    """Causal multi-head self-attention."""

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.n_heads = args.n_heads
        self.head_dim = args.dim // args.n_heads
        self.wq = nn.Linear(args.dim, args.dim, bias=False)
        self.wk = nn.Linear(args.dim, args.dim, bias=False)
        self.wv = nn.Linear(args.dim, args.dim, bias=False)
        self.wo = nn.Linear(args.dim, args.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        # [batch, seq, heads * head_dim] -> [batch, heads, seq, head_dim]
        q = xq.view(batch, seq, self.n_heads, self.head_dim).transpose(1, 2)
        k = xk.view(batch, seq, self.n_heads, self.head_dim).transpose(1, 2)
        v = xv.view(batch, seq, self.n_heads, self.head_dim).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(batch, seq, self.n_heads * self.head_dim))


class FeedForward(nn.Module):
    """SwiGLU: ``w2(silu(w1(x)) * w3(x))``."""

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.w1 = nn.Linear(args.dim, args.hidden_dim, bias=False)
        self.w2 = nn.Linear(args.hidden_dim, args.dim, bias=False)
        self.w3 = nn.Linear(args.dim, args.hidden_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    """Pre-norm attention and feed-forward, each added to the residual stream."""

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.attention_norm = nn.RMSNorm(args.dim, eps=args.norm_eps)
        self.attention = Attention(args)
        self.ffn_norm = nn.RMSNorm(args.dim, eps=args.norm_eps)
        self.feed_forward = FeedForward(args)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))
