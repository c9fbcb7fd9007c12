"""A small GPT, tensor parallel the Megatron way, with every boundary SPMD-typed.

The layers are the ones a Megatron-LM or torchtitan user writes by hand:

* a vocab-parallel embedding (each tp rank owns a slice of the vocabulary,
  looks up the tokens that fall in it, zeros the rest: a partial sum);
* attention with column-parallel q, k, v (heads split over tp) and a
  row-parallel output projection;
* a column-parallel -> row-parallel MLP;
* LayerNorms before each sub-layer and at the end;
* a column-parallel LM head and a vocab-parallel cross entropy.

Types are written on the ``tp`` axis only: tensor-parallel code never mentions
``dp``, and the checker passes the data axis (``S(1)@dp``, the batch dim of the
``[seq, batch, hidden]`` activations) through every layer.  Parameters are the
same on every dp rank and used by per-rank compute (``R@dp``), so their
gradients come out as ``P@dp`` and :func:`sync_data_parallel_grads` reduces
them, as DDP does.

Sequence parallelism is a flag (``Config.sequence_parallel``), tested
inside each layer the way Megatron writes it (``if self.sequence_parallel:``),
that picks between the two type cycles of docs/spec.md#loss-rule:

* SP off: activations between blocks are ``I@tp``; a sub-layer is entered
  with ``convert(I, R)`` (backward: all-reduce) and left with
  ``all_reduce(P, I)`` (backward: identity).  Norm weights are ``I@tp`` and
  meet ``I@tp`` activations: every rank does the same work.
* SP on: activations are ``S(0)@tp`` (split on the sequence dim); a sub-layer
  is entered with ``all_gather(S(0), R)`` (backward: reduce-scatter) and left
  with ``reduce_scatter(P, S(0))`` (backward: all-gather).  Norm weights are
  still ``I@tp`` parameters but meet different tokens on each rank, so they
  enter through ``convert(I, R)``, whose backward all-reduces their gradient.

The activations' type is written once, :data:`Activation`, chosen by the
flag; the checker runs every layer in both configurations declared in
``examples/mypy.ini`` (``spmd-check``, docs/checker.md#configurations).  The
interior of a sub-layer is the same in both: ``R@tp -> column-parallel ->
S(-1)@tp -> ... -> row-parallel -> P@tp``.

The parallel linears and the MLP are global SPMD on tp
(``@spmd.global_spmd(tp)``): their bodies mean the whole-tensor computation,
the row-parallel product saying ``spmd.linear(x, w, out_partial_axes=tp)``
where local code writes the product and then ``reinterpret(V, P)``.  Their
annotations are the module boundary between the two modes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import spmd_stubs as spmd
from spmd_stubs import I, P, Pmax, R, S, Tensor, V
from spmd_stubs.axes import dp, tp

EPS = 1e-5
Params = dict[str, torch.Tensor]

Activation = Tensor[S[0, tp]] if spmd.flags.sequence_parallel else Tensor[I[tp]]
"""The activations between blocks: split on the sequence dim with sequence parallelism, whole without."""


@dataclass(frozen=True)
class Config:
    """Model and batch sizes; tiny so that a 4-rank CPU run takes seconds."""

    vocab: int = 16
    hidden: int = 8
    heads: int = 2
    ffn: int = 16
    layers: int = 2
    seq: int = 4
    batch: int = 4  # the global batch, split over dp
    sequence_parallel: bool = False


# --------------------------------------------------------------------------
# Full weights (one process, fixed seed) and this rank's shards of them
# --------------------------------------------------------------------------

# Tensor dim each weight is split on over tp; weights not listed are replicated.
# q, k, v and w1 are column-parallel (output rows), wo and w2 row-parallel
# (input columns), the embedding and LM head vocab-parallel (vocab rows).
TP_SHARD_DIM = {"embedding.weight": 0, "lm_head": 0, "wq": 0, "wk": 0, "wv": 0, "w1": 0, "wo": 1, "w2": 1}


def init_full_params(cfg: Config, seed: int = 0) -> Params:
    """Every weight of the unparallelised model, float64, from one generator.

    The names are those of :class:`GPT`'s ``named_parameters()``.
    """
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape: int, scale: float) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * scale

    h, f = cfg.hidden, cfg.ffn
    params = {"embedding.weight": randn(cfg.vocab, h, scale=1.0)}
    for i in range(cfg.layers):
        block = f"blocks.{i}"
        for norm in ("attn_norm", "mlp_norm"):
            params[f"{block}.{norm}.weight"] = 1 + randn(h, scale=0.1)
            params[f"{block}.{norm}.bias"] = randn(h, scale=0.1)
        for name in ("wq", "wk", "wv", "wo"):
            params[f"{block}.attention.{name}"] = randn(h, h, scale=h**-0.5)
        params[f"{block}.mlp.w1"] = randn(f, h, scale=h**-0.5)
        params[f"{block}.mlp.w2"] = randn(h, f, scale=f**-0.5)
    params["final_norm.weight"] = 1 + randn(h, scale=0.1)
    params["final_norm.bias"] = randn(h, scale=0.1)
    params["lm_head"] = randn(cfg.vocab, h, scale=h**-0.5)
    return params


def tp_shard(name: str, full: torch.Tensor, tp_rank: int, tp_size: int) -> torch.Tensor:
    """This tp rank's part of the weight ``name`` (a copy), or all of it if replicated."""
    dim = TP_SHARD_DIM.get(name) if name in TP_SHARD_DIM else TP_SHARD_DIM.get(name.rsplit(".", 1)[-1])
    part = full if dim is None else full.chunk(tp_size, dim)[tp_rank]
    return part.detach().clone()


def _param(params: Params, name: str, tp_rank: int, tp_size: int) -> nn.Parameter:
    return nn.Parameter(tp_shard(name, params[name], tp_rank, tp_size))


# --------------------------------------------------------------------------
# Parallel linear layers
# --------------------------------------------------------------------------


# The two parallel linears are written in global SPMD on tp: their bodies mean
# the whole matrix product, and their S(i)@tp annotations say how each rank's
# piece sits in the whole tensor.  Everything else in this file is local SPMD.
# Side by side with the local form of row_parallel:
#
#     local:   spmd.reinterpret(x @ weight.T, tp, src=V, dst=P)
#     global:  spmd.linear(x, weight, out_partial_axes=tp)


@spmd.global_spmd(tp)
def column_parallel(x: Tensor[R@tp], weight: Tensor[S(0)@tp]) -> Tensor[S(-1)@tp]:
    """``x @ W.T`` with W's output rows split over tp: each rank computes its output columns.

    No split dim is contracted, so each rank's product is its piece of the
    global product.  ``x`` is R: every rank uses the same input for different
    work, so its gradient is a pending sum over tp (what the entry collective
    reduces).
    """
    return spmd.linear(x, weight)


@spmd.global_spmd(tp)
def row_parallel(x: Tensor[S(-1)@tp], weight: Tensor[S(1)@tp]) -> Tensor[P@tp]:
    """``x @ W.T`` with W's input columns split over tp: each rank holds a part of the sum.

    The contracted dim is split over tp, so each rank's product is a part of
    the global product: ``out_partial_axes=tp`` says so (in global SPMD a
    partial result is never implicit; local code writes the product and then
    ``reinterpret(V, P)``).  Nothing may be added to it before the reduction
    (see the bias bug in ``examples/bugs``).
    """
    return spmd.linear(x, weight, out_partial_axes=tp)


# --------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------


class VocabParallelEmbedding(nn.Module):
    """Embedding table split by vocab rows over tp (Megatron's VocabParallelEmbedding)."""

    def __init__(self, params: Params, tp_rank: int, tp_size: int) -> None:
        super().__init__()
        self.weight: Tensor[S(0)@tp] = _param(params, "embedding.weight", tp_rank, tp_size)
        rows = self.weight.shape[0]
        self.vocab_start, self.vocab_end = tp_rank * rows, (tp_rank + 1) * rows

    def forward(self, tokens: Tensor[I@tp]) -> Tensor[P@tp]:
        """Rows of this rank's vocab slice, zeros elsewhere: summed over tp, the embedding.

        The mask depends on the rank through ``vocab_start`` (a python int,
        invisible to local typing), which is why the result is declared a
        partial explicitly rather than left as the V of the local lookup.
        """
        outside = (tokens < self.vocab_start) | (tokens >= self.vocab_end)
        local_ids = torch.where(outside, 0, tokens - self.vocab_start)
        rows = F.embedding(local_ids, self.weight).masked_fill(outside.unsqueeze(-1), 0.0)
        return spmd.reinterpret(rows, tp, src=V, dst=P)


class LayerNorm(nn.Module):
    """LayerNorm whose weight and bias are the same on every tp rank (``I@tp``)."""

    def __init__(self, params: Params, prefix: str, sequence_parallel: bool) -> None:
        super().__init__()
        self.weight: Tensor[I@tp] = nn.Parameter(params[f"{prefix}.weight"].detach().clone())
        self.bias: Tensor[I@tp] = nn.Parameter(params[f"{prefix}.bias"].detach().clone())
        self.sequence_parallel = sequence_parallel

    def forward(self, x: Activation) -> Activation:
        """SP off: every tp rank normalises the same tokens, the same computation (I).

        SP on: each rank normalises its own tokens with the shared weight, which
        then gets a different gradient on each rank; entering it with
        ``convert(I, R)`` all-reduces that gradient in the backward (the
        reduction Megatron performs by hand for sequence-parallel norms).
        """
        if self.sequence_parallel:
            weight = spmd.convert(self.weight, tp, src=I, dst=R)
            bias = spmd.convert(self.bias, tp, src=I, dst=R)
            return F.layer_norm(x, x.shape[-1:], weight, bias, EPS)
        else:
            return F.layer_norm(x, x.shape[-1:], self.weight, self.bias, EPS)


def enter_tensor_parallel(x: Activation, sequence_parallel: bool) -> Tensor[R@tp]:
    """Into a sub-layer: every rank needs every token (Megatron's copy_to / gather_from_sequence_parallel).

    SP off: ``convert(I, R)``, whose backward all-reduces the gradient.  SP on:
    ``all_gather(S(0), R)``, whose backward reduce-scatters it.
    """
    if sequence_parallel:
        return spmd.all_gather(x, tp, src=S(0), dst=R)
    else:
        return spmd.convert(x, tp, src=I, dst=R)


def leave_tensor_parallel(x: Tensor[P@tp], sequence_parallel: bool) -> Activation:
    """Out of a sub-layer: the partial sums reduced (Megatron's reduce_from / reduce_scatter_to_sequence_parallel).

    SP off: ``all_reduce(P, I)``, backward the identity.  SP on:
    ``reduce_scatter(P, S(0))``, backward an all-gather.
    """
    if sequence_parallel:
        return spmd.reduce_scatter(x, tp, src=P, dst=S(0))
    else:
        return spmd.all_reduce(x, tp, src=P, dst=I)


class Attention(nn.Module):
    """Causal self-attention; heads split over tp (q, k, v column-, wo row-parallel)."""

    def __init__(self, params: Params, prefix: str, cfg: Config, tp_rank: int, tp_size: int) -> None:
        super().__init__()
        self.wq: Tensor[S(0)@tp] = _param(params, f"{prefix}.wq", tp_rank, tp_size)
        self.wk: Tensor[S(0)@tp] = _param(params, f"{prefix}.wk", tp_rank, tp_size)
        self.wv: Tensor[S(0)@tp] = _param(params, f"{prefix}.wv", tp_rank, tp_size)
        self.wo: Tensor[S(1)@tp] = _param(params, f"{prefix}.wo", tp_rank, tp_size)
        self.local_heads = cfg.heads // tp_size
        self.head_dim = cfg.hidden // cfg.heads

    def forward(self, x: Tensor[R@tp]) -> Tensor[P@tp]:
        q = self._split_heads(column_parallel(x, self.wq))
        k = self._split_heads(column_parallel(x, self.wk))
        v = self._split_heads(column_parallel(x, self.wv))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return row_parallel(self._merge_heads(out), self.wo)

    def _split_heads(self, t: Tensor[V@tp]) -> Tensor[V@tp]:
        """[seq, batch, local_heads * head_dim] -> [batch, local_heads, seq, head_dim]."""
        seq, batch, _ = t.shape
        return t.reshape(seq, batch, self.local_heads, self.head_dim).permute(1, 2, 0, 3)

    def _merge_heads(self, t: Tensor[V@tp]) -> Tensor[V@tp]:
        """[batch, local_heads, seq, head_dim] -> [seq, batch, local_heads * head_dim]."""
        batch, heads, seq, head_dim = t.shape
        return t.permute(2, 0, 1, 3).reshape(seq, batch, heads * head_dim)


class MLP(nn.Module):
    """``gelu(x @ w1.T) @ w2.T``: w1 column-parallel, w2 row-parallel (no communication inside)."""

    def __init__(self, params: Params, prefix: str, tp_rank: int, tp_size: int) -> None:
        super().__init__()
        self.w1: Tensor[S(0)@tp] = _param(params, f"{prefix}.w1", tp_rank, tp_size)
        self.w2: Tensor[S(1)@tp] = _param(params, f"{prefix}.w2", tp_rank, tp_size)

    @spmd.global_spmd(tp)
    def forward(self, x: Tensor[R@tp]) -> Tensor[P@tp]:
        """Global SPMD on tp: ``gelu(x @ w1.T) @ w2.T``, the hidden dim split over tp throughout."""
        hidden: Tensor[S(-1)@tp] = F.gelu(column_parallel(x, self.w1))
        return row_parallel(hidden, self.w2)


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, params: Params, prefix: str, cfg: Config, tp_rank: int, tp_size: int) -> None:
        super().__init__()
        self.sequence_parallel = cfg.sequence_parallel
        self.attn_norm = LayerNorm(params, f"{prefix}.attn_norm", cfg.sequence_parallel)
        self.attention = Attention(params, f"{prefix}.attention", cfg, tp_rank, tp_size)
        self.mlp_norm = LayerNorm(params, f"{prefix}.mlp_norm", cfg.sequence_parallel)
        self.mlp = MLP(params, f"{prefix}.mlp", tp_rank, tp_size)

    def forward(self, x: Activation) -> Activation:
        h = enter_tensor_parallel(self.attn_norm(x), self.sequence_parallel)
        x = x + leave_tensor_parallel(self.attention(h), self.sequence_parallel)
        h = enter_tensor_parallel(self.mlp_norm(x), self.sequence_parallel)
        return x + leave_tensor_parallel(self.mlp(h), self.sequence_parallel)


class GPT(nn.Module):
    """Embedding, blocks, final norm, LM head: tokens ``[seq, batch]`` -> vocab-sharded logits."""

    def __init__(self, cfg: Config, params: Params, tp_rank: int, tp_size: int) -> None:
        super().__init__()
        self.sequence_parallel = cfg.sequence_parallel
        self.embedding = VocabParallelEmbedding(params, tp_rank, tp_size)
        self.blocks = nn.ModuleList(
            Block(params, f"blocks.{i}", cfg, tp_rank, tp_size) for i in range(cfg.layers)
        )
        self.final_norm = LayerNorm(params, "final_norm", cfg.sequence_parallel)
        self.lm_head: Tensor[S(0)@tp] = _param(params, "lm_head", tp_rank, tp_size)

    def forward(self, tokens: Tensor[I@tp]) -> Tensor[S(-1)@tp]:
        """Logits ``[seq, batch, vocab / tp]``: this rank's slice of the vocabulary."""
        x = leave_tensor_parallel(self.embedding(tokens), self.sequence_parallel)
        for block in self._layers():
            x = block(x)
        hidden = enter_tensor_parallel(self.final_norm(x), self.sequence_parallel)
        return column_parallel(hidden, self.lm_head)

    def _layers(self) -> list[Block]:
        return [block for block in self.blocks if isinstance(block, Block)]


# --------------------------------------------------------------------------
# Loss
# --------------------------------------------------------------------------


def vocab_parallel_cross_entropy(
    logits: Tensor[S(-1)@tp], targets: Tensor[I@tp], vocab_start: int
) -> Tensor[I@tp]:
    """Per-token cross entropy of vocab-sharded logits, the same on every tp rank.

    ``loss = log(sum_v exp(z_v - m)) - (z_target - m)`` with every sum over
    the whole vocabulary, i.e. over tp: the full logits are never gathered.
    """
    # 1. The row max, for a stable exp: each rank's max over its slice is a
    #    part of one pending max (Pmax, not a sum), resolved by a MAX
    #    all-reduce.  Detached: the loss does not depend on the shift, so the
    #    shift needs no gradient; R because each rank subtracts it from its
    #    own, different logits.
    local_max = spmd.reinterpret(logits.detach().amax(dim=-1), tp, src=V, dst=Pmax)
    row_max = spmd.all_reduce(local_max, tp, src=Pmax, dst=R)
    shifted = logits - row_max.unsqueeze(-1)
    # 2. sum_v exp: each rank's sum over its slice is a part of one sum (P).
    #    Every rank then does the same thing with the total (dst=I), so the
    #    backward is the identity: each rank's part gets that same gradient.
    local_sum = spmd.reinterpret(shifted.exp().sum(dim=-1), tp, src=V, dst=P)
    sum_exp = spmd.all_reduce(local_sum, tp, src=P, dst=I)
    # 3. The target's logit lives on one rank; the others contribute zero to
    #    the same kind of sum.
    outside = (targets < vocab_start) | (targets >= vocab_start + logits.shape[-1])
    local_ids = torch.where(outside, 0, targets - vocab_start)
    picked = shifted.gather(-1, local_ids.unsqueeze(-1)).squeeze(-1).masked_fill(outside, 0.0)
    target_logit = spmd.all_reduce(spmd.reinterpret(picked, tp, src=V, dst=P), tp, src=P, dst=I)
    return torch.log(sum_exp) - target_logit


def data_parallel_mean(per_token: Tensor[I@tp, S(1)@dp], dp_size: int) -> Tensor[I@tp, P@dp]:
    """This dp rank's share of the global mean loss: the sum over dp is the mean.

    Each dp rank averages its own (equal-sized) micro-batch and divides by the
    number of dp ranks; declaring the result P@dp says the global loss is the
    sum of the ranks' values, which is what makes ``backward()`` correct.
    """
    return spmd.reinterpret(per_token.mean() / dp_size, dp, src=V, dst=P)


def gpt_loss(
    model: GPT, tokens: Tensor[I@tp, S(1)@dp], targets: Tensor[I@tp, S(1)@dp], dp_size: int
) -> Tensor[I@tp, P@dp]:
    """The training loss of this rank's micro-batch: ``I@tp`` (vocab-parallel CE), ``P@dp``."""
    logits = model(tokens)
    per_token = vocab_parallel_cross_entropy(logits, targets, model.embedding.vocab_start)
    return data_parallel_mean(per_token, dp_size)


def sync_data_parallel_grads(model: nn.Module) -> None:
    """Sum every parameter's gradient over dp (they are ``P@dp``: one part per dp rank), in place as DDP does."""
    with torch.no_grad():
        for param in model.parameters():
            assert param.grad is not None, "every parameter takes part in the loss"
            spmd.all_reduce_(param.grad, dp, src=P, dst=R)
