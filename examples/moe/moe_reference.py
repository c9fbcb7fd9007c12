"""The same mixture of experts in one process, without any parallelism: the ground truth.

Written independently of :mod:`ep_moe` (a loop over the experts with a mask
of the tokens routed to each, full-size weights) so that a shared mistake
cannot make the two agree.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from ep_moe import Config, Params


def reference_loss(params: Params, x: torch.Tensor, target: torch.Tensor, cfg: Config) -> torch.Tensor:
    """Mean squared error of the block's output over the whole batch, plus the weighted load-balancing loss."""
    probs = torch.softmax(x @ params["router"].T, dim=-1)
    top_probs, top_experts = probs.topk(cfg.top_k, dim=-1)
    out = torch.zeros_like(x)
    routed_fraction = []
    for e in range(cfg.experts):
        # weight of expert e for each token: its probability where e is among the token's top k, else 0
        weight = (top_probs * (top_experts == e)).sum(dim=-1, keepdim=True)
        chosen = (top_experts == e).any(dim=-1)
        y = F.silu(x[chosen] @ params["w1"][e].T) @ params["w2"][e].T
        out[chosen] += weight[chosen] * y
        routed_fraction.append(chosen.sum() / (x.shape[0] * cfg.top_k))
    load_balancing = cfg.experts * (torch.stack(routed_fraction) * probs.mean(dim=0)).sum()
    return ((out - target) ** 2).mean() + cfg.aux_weight * load_balancing
