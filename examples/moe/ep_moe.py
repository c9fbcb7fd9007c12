"""A mixture-of-experts block, experts split over ``ep`` and tensor parallel over ``tp``, every boundary typed.

The block is the one a Megatron-LM or torchtitan user writes by hand:

* a router: ``softmax(x @ W_r.T)`` over the experts, the top ``k`` experts of
  each token kept with their probabilities;
* the token dispatch: each rank sorts its token copies by expert, exchanges
  the per-expert counts (an even ``all_to_all`` of integers), then the rows
  themselves (the uneven ``all_to_all(V, V)`` with the counts as split sizes);
* the experts, ``silu(x @ w1.T) @ w2.T``: each ep rank holds its own experts
  (``S(0)@ep`` on the stack of every expert's weights), each split over tp
  the Megatron way (w1 column-, w2 row-parallel, one all-reduce after w2);
* the combine: the rows sent back by the reverse exchange, each weighted by
  its router probability (the main loss's path to the router) and summed
  per token;
* a load-balancing loss (Switch Transformer's): ``E * sum_e f_e * p_e``, with
  ``f_e`` the fraction of token copies sent to expert e over the whole
  batch (counts, no gradient) and ``p_e`` the mean router probability of e.

Tokens are ``[tokens, hidden]``, split over ep on dim 0 (``S(0)@ep``: ep is
also the data axis, as in torchtitan) and the same on every tp rank
(``I@tp``).  The router weight is the same on every rank: ``R@ep`` (per-rank
tokens, so its gradient is a pending sum over ep, reduced by
:func:`sync_expert_parallel_grads`) and ``I@tp`` (every tp rank routes the
same tokens).  An expert weight's gradient is whole on the rank that owns
the expert: the reverse exchange brings back every row's gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import ep, tp

Params = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Config:
    """Sizes; tiny so that a 4-rank CPU run takes seconds."""

    hidden: int = 8
    ffn: int = 16
    experts: int = 4
    top_k: int = 2
    tokens: int = 16  # the global batch, split over ep
    aux_weight: float = 0.01  # the load-balancing loss's weight in the training loss


# Tensor dim each weight is split on over tp: w1 column-parallel (its ffn
# rows), w2 row-parallel (its ffn columns); the router is replicated.
TP_SHARD_DIM = {"w1": 1, "w2": 2}


def init_full_params(cfg: Config, seed: int = 0) -> Params:
    """Every weight of the unparallelised block, float64, from one generator.

    ``w1``: ``[experts, ffn, hidden]``, ``w2``: ``[experts, hidden, ffn]``,
    ``router``: ``[experts, hidden]``.
    """
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape: int, scale: float) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * scale

    h, f, e = cfg.hidden, cfg.ffn, cfg.experts
    return {"router": randn(e, h, scale=h**-0.5), "w1": randn(e, f, h, scale=h**-0.5), "w2": randn(e, h, f, scale=f**-0.5)}


def shard(name: str, full: torch.Tensor, ep_rank: int, ep_size: int, tp_rank: int, tp_size: int) -> torch.Tensor:
    """This rank's part of the weight ``name`` (a copy): its experts, their tp slice; the router whole."""
    if name not in TP_SHARD_DIM:
        return full.detach().clone()
    mine = full.chunk(ep_size, 0)[ep_rank]
    return mine.chunk(tp_size, TP_SHARD_DIM[name])[tp_rank].detach().clone()


@dataclass(frozen=True)
class Exchange:
    """The row counts of one dispatch, from this rank's side."""

    sent: Tensor[V@ep, I@tp]
    """Rows sent to each ep rank (integers, the same on each tp rank: the exchange keeps rows I@tp)."""
    received: Tensor[V@ep, I@tp]
    """Rows received from each ep rank."""
    from_each: Tensor[V@ep, I@tp]
    """``[ep, local experts]`` integers: row j, how many of rank j's rows go to each of this rank's experts."""


class MoE(nn.Module):
    """Router, dispatch over ep, tensor-parallel experts, combine: ``[tokens, hidden]`` in and out."""

    def __init__(self, cfg: Config, params: Params, ep_rank: int, ep_size: int, tp_rank: int, tp_size: int) -> None:
        super().__init__()
        self.router: Tensor[R@ep, I@tp] = nn.Parameter(params["router"].detach().clone())
        # Each ep rank its experts (a shard of the stack on dim 0), each expert split over tp.
        self.w1: Tensor[S(0)@ep, S(1)@tp] = nn.Parameter(shard("w1", params["w1"], ep_rank, ep_size, tp_rank, tp_size))
        self.w2: Tensor[S(0)@ep, S(2)@tp] = nn.Parameter(shard("w2", params["w2"], ep_rank, ep_size, tp_rank, tp_size))
        self.top_k = cfg.top_k
        self.experts = cfg.experts
        self.ep_size = ep_size

    def forward(self, x: Tensor[S(0)@ep, I@tp]) -> tuple[Tensor[S(0)@ep, I@tp], Tensor[P@ep, I@tp]]:
        """The block's output for this rank's tokens, and this rank's share of the load-balancing loss."""
        probs = torch.softmax(x @ self.router.T, dim=-1)
        top_probs, top_experts = probs.topk(self.top_k, dim=-1)
        # Every token copy, sorted by expert: the ep rank that owns an expert gets a contiguous run.
        order = top_experts.flatten().argsort(stable=True)
        routed = x[order // self.top_k]
        counts = torch.bincount(top_experts.flatten(), minlength=self.experts)
        dispatched, exchange = self._dispatch(routed, counts)
        expert_out = self._experts(dispatched, exchange)
        # Back to each copy's place; weighting by the probability is the main loss's path to the router.
        copies = expert_out[order.argsort()].view(x.shape[0], self.top_k, -1)
        out = (copies * top_probs.unsqueeze(-1)).sum(dim=1)
        return out, self._load_balancing_share(probs, counts, x.shape[0])

    def _dispatch(self, routed: Tensor[V@ep, I@tp], counts: Tensor[V@ep, I@tp]) -> tuple[Tensor[V@ep, I@tp], Exchange]:
        """Send each copy to the rank of its expert; receive, from each rank, the copies for this rank's experts.

        ``routed``: this rank's copies sorted by expert; ``counts[e]``: how
        many of them go to expert e.  The counts go first, so that each rank
        knows how many rows it receives from each.
        """
        per_rank = counts.view(self.ep_size, -1)
        from_each = spmd.all_to_all(per_rank, ep, src=V, dst=V)
        exchange = Exchange(per_rank.sum(dim=1), from_each.sum(dim=1), from_each)
        rows = spmd.all_to_all(
            routed, ep, src=V, dst=V,
            input_split_sizes=exchange.sent.tolist(), output_split_sizes=exchange.received.tolist(),
        )
        return rows, exchange

    def _experts(self, rows: Tensor[V@ep, I@tp], exchange: Exchange) -> Tensor[V@ep, I@tp]:
        """Each received row through its expert, then back to the ranks that sent them (the reverse exchange).

        The rows come grouped by sending rank, then by expert within each:
        they are regrouped by expert for the experts and put back in the
        order received before the return exchange, whose split sizes are the
        dispatch's swapped.
        """
        local_experts = self.w1.shape[0]
        expert_of_row = torch.arange(local_experts).repeat(self.ep_size).repeat_interleave(exchange.from_each.flatten())
        by_expert = expert_of_row.argsort(stable=True)
        groups = rows[by_expert].split(exchange.from_each.sum(dim=0).tolist())
        outs = [self._expert(group, self.w1[e], self.w2[e]) for e, group in enumerate(groups)]
        out = torch.cat(outs)[by_expert.argsort()]
        return spmd.all_to_all(
            out, ep, src=V, dst=V,
            input_split_sizes=exchange.received.tolist(), output_split_sizes=exchange.sent.tolist(),
        )

    @staticmethod
    def _expert(rows: Tensor[I@tp], w1: Tensor[V@tp], w2: Tensor[V@tp]) -> Tensor[I@tp]:
        """``silu(rows @ w1.T) @ w2.T``, w1 column- and w2 row-parallel over tp.

        Entering with ``convert(I, R)`` all-reduces the rows' gradient over tp
        in the backward; w2's product is this rank's part of the sum over the
        ffn dim, reduced once (``all_reduce(P, I)``, backward the identity).
        """
        hidden = F.silu(spmd.convert(rows, tp, src=I, dst=R) @ w1.T)
        return spmd.all_reduce(spmd.reinterpret(hidden @ w2.T, tp, src=V, dst=P), tp, src=P, dst=I)

    def _load_balancing_share(
        self, probs: Tensor[S(0)@ep, I@tp], counts: Tensor[V@ep, I@tp], local_tokens: int
    ) -> Tensor[P@ep, I@tp]:
        """This rank's part of ``E * sum_e f_e * p_e``; summed over ep, the loss of the whole batch.

        ``f_e`` needs every rank's counts (an all-reduce; integers, no
        gradient); ``p_e``'s sum over the batch is this rank's sum plus the
        others': a pending sum, left pending so that each rank's probabilities
        get their own gradient.
        """
        total_tokens = local_tokens * self.ep_size
        all_counts = spmd.all_reduce(counts, ep, src=P, dst=R)
        fraction = all_counts / (total_tokens * self.top_k)
        mean_prob = spmd.reinterpret(probs.sum(dim=0) / total_tokens, ep, src=V, dst=P)
        return self.experts * (fraction * mean_prob).sum()


def moe_loss(
    model: MoE, x: Tensor[S(0)@ep, I@tp], target: Tensor[S(0)@ep, I@tp], aux_weight: float
) -> Tensor[P@ep, I@tp]:
    """This rank's share of the training loss: the global mean squared error plus the weighted load-balancing loss."""
    out, load_balancing = model(x)
    squared_error = spmd.reinterpret(((out - target) ** 2).mean() / model.ep_size, ep, src=V, dst=P)
    return squared_error + aux_weight * load_balancing


def sync_expert_parallel_grads(model: MoE) -> None:
    """Sum the router's gradient over ep (``P@ep``: each rank's tokens give a part); the experts' are whole."""
    with torch.no_grad():
        assert model.router.grad is not None, "the router takes part in the loss"
        spmd.all_reduce_(model.router.grad, ep, src=P, dst=R)
