"""The same GPT in one process, without any parallelism: the ground truth.

Written independently of :mod:`tp_gpt` (plain full-size weights, ``F.cross_entropy``)
so that a shared mistake cannot make the two agree.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from tp_gpt import EPS, Config, Params


def _attention(h: torch.Tensor, params: Params, prefix: str, heads: int) -> torch.Tensor:
    seq, batch, hidden = h.shape

    def split(w: torch.Tensor) -> torch.Tensor:
        return (h @ w.T).reshape(seq, batch, heads, hidden // heads).permute(1, 2, 0, 3)

    q, k, v = (split(params[f"{prefix}.{name}"]) for name in ("wq", "wk", "wv"))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return out.permute(2, 0, 1, 3).reshape(seq, batch, hidden) @ params[f"{prefix}.wo"].T


def _norm(x: torch.Tensor, params: Params, prefix: str) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], params[f"{prefix}.weight"], params[f"{prefix}.bias"], EPS)


def reference_loss(params: Params, tokens: torch.Tensor, targets: torch.Tensor, cfg: Config) -> torch.Tensor:
    """Mean cross entropy over every token of the global batch ``[seq, batch]``."""
    x = F.embedding(tokens, params["embedding.weight"])
    for i in range(cfg.layers):
        block = f"blocks.{i}"
        x = x + _attention(_norm(x, params, f"{block}.attn_norm"), params, f"{block}.attention", cfg.heads)
        h = _norm(x, params, f"{block}.mlp_norm")
        x = x + F.gelu(h @ params[f"{block}.mlp.w1"].T) @ params[f"{block}.mlp.w2"].T
    logits = _norm(x, params, "final_norm") @ params["lm_head"].T
    return F.cross_entropy(logits.reshape(-1, cfg.vocab), targets.reshape(-1))
