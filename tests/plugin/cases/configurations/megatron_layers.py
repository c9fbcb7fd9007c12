"""megatron-core's layers as megatron writes them: one forward per layer, the layout chosen inside by a flag.

Checked in two configurations (``_extra.ini``): ``sp`` (sequence_parallel =
true) and ``no_sp``.  The activations between layers are ``S(0)@tp`` with
sequence parallelism and ``I@tp`` without: one alias, written once.
"""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor
from spmd_stubs.axes import tp

Activation = Tensor[S[0, tp]] if spmd.flags.sequence_parallel else Tensor[I[tp]]


@dataclass
class TransformerConfig:
    hidden_size: int
    sequence_parallel: bool


class ColumnParallelLinear(nn.Module):
    """Y = X A, A split by columns; the input enters by copy (I -> R) or, with SP, by all-gather."""

    weight: Tensor[S(0)@tp]

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.sequence_parallel = config.sequence_parallel

    def forward(self, input_: Activation) -> Tensor[S(-1)@tp]:
        if self.sequence_parallel:
            total_input = spmd.all_gather(input_, tp, src=S(0), dst=R)
        else:
            total_input = spmd.convert(input_, tp, src=I, dst=R)
        return F.linear(total_input, self.weight)


class RowParallelLinear(nn.Module):
    """Y = X A, A split by rows; the partial sums leave by all-reduce or, with SP, by reduce-scatter."""

    weight: Tensor[S(1)@tp]
    bias: Tensor[I@tp]

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.sequence_parallel = config.sequence_parallel

    def forward(self, input_: Tensor[S(-1)@tp]) -> Activation:
        output_parallel = spmd.reinterpret(F.linear(input_, self.weight), tp, src=S(-1), dst=P)
        if self.sequence_parallel:
            output_ = spmd.reduce_scatter(output_parallel, tp, src=P, dst=S(0))
            # megatron marks this bias sequence_parallel and all-reduces its gradient elsewhere;
            # the typed layer says so where the bias meets each rank's slice of the sequence
            return output_ + spmd.convert(self.bias, tp, src=I, dst=R)
        output_ = spmd.all_reduce(output_parallel, tp, src=P, dst=I)
        return output_ + self.bias


class RowParallelLinearBiasBug(RowParallelLinear):
    """The bias added without its convert: a gradient bug with sequence parallelism only."""

    def forward(self, input_: Tensor[S(-1)@tp]) -> Activation:
        output_parallel = spmd.reinterpret(F.linear(input_, self.weight), tp, src=S(-1), dst=P)
        if self.sequence_parallel:
            output_ = spmd.reduce_scatter(output_parallel, tp, src=P, dst=S(0))
        else:
            output_ = spmd.all_reduce(output_parallel, tp, src=P, dst=I)
        return output_ + self.bias  # E[sp]: spmd-invariant-mix (V@tp, I@tp)


class LayerNorm(nn.Module):
    """A norm whose weight is the same on every rank (I@tp): with SP it meets each rank's own tokens."""

    weight: Tensor[I@tp]

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.sequence_parallel = config.sequence_parallel

    def forward(self, x: Activation) -> Activation:
        weight = spmd.convert(self.weight, tp, src=I, dst=R) if self.sequence_parallel else self.weight
        return F.layer_norm(x, x.shape[-1:], weight)


class LayerNormWeightBug(LayerNorm):
    """The SP norm-weight bug: the weight's gradient is never reduced over tp (with SP only)."""

    def forward(self, x: Activation) -> Activation:
        return F.layer_norm(x, x.shape[-1:], self.weight)  # E[sp]: spmd-invariant-mix layer_norm mixes Invariant with Varying on axis tp (V@tp, I@tp)


class TransformerLayer(nn.Module):
    """Pre-norm block, written once: ``x + mlp(norm(x))``."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.norm = LayerNorm(config)
        self.fc1 = ColumnParallelLinear(config)
        self.fc2 = RowParallelLinear(config)

    def forward(self, hidden_states: Activation) -> Activation:
        reveal_type(hidden_states)  # N[sp]: Tensor[S(0)@tp] # N[no_sp]: Tensor[I@tp]
        intermediate = F.gelu(self.fc1(self.norm(hidden_states)))
        return hidden_states + self.fc2(intermediate)


def row_parallel_bias_bug(layer: TransformerLayer, hidden_states: Activation) -> Tensor[I@tp]:
    """A bug in every configuration: the bias added to the partial sums before their reduction."""
    partial = spmd.reinterpret(F.linear(layer.fc1(hidden_states), layer.fc2.weight), tp, src=S(-1), dst=P)
    bias = spmd.convert(layer.fc2.bias, tp, src=I, dst=R)
    return spmd.all_reduce(partial + bias, tp, src=P, dst=I)  # E: spmd-partial-affine (P@tp + R@tp)


def embed(tokens: Tensor[I@tp], table: Tensor[S(0)@tp], config: TransformerConfig) -> Activation:
    """The embedding's partial sum leaves by all-reduce, or by reduce-scatter into the sequence slice."""
    partial = spmd.reinterpret(F.embedding(tokens, table), tp, src=S(-1), dst=P)
    if config.sequence_parallel:
        return spmd.reduce_scatter(partial, tp, src=P, dst=S(0))
    return spmd.all_reduce(partial, tp, src=P, dst=I)


def embed_forgets_scatter(tokens: Tensor[I@tp], table: Tensor[S(0)@tp], config: TransformerConfig) -> Activation:
    partial = spmd.reinterpret(F.embedding(tokens, table), tp, src=S(-1), dst=P)
    return spmd.all_reduce(partial, tp, src=P, dst=I)  # E[sp]: return-value
