"""A norm written in python (Hugging Face's LlamaRMSNorm, the llama reference's RMSNorm, each weight an
``nn.Parameter``) left out of a sequence parallel plan: its weight stays a plain tensor whose gradient sums only
this rank's tokens, as a torch norm's would; with plain tensor parallelism the norms see the whole activations and
need no style."""
import torch
from plugin.cases.plans._hf_llama import LlamaDecoderLayer
from plugin.cases.plans._llama import Attention, FeedForward
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


def post_attention_layernorm_left_out(layer: LlamaDecoderLayer, tp_mesh: DeviceMesh) -> None:
    parallelize_module(layer, tp_mesh, {  # E: spmd-plan LlamaDecoderLayer.forward: "post_attention_layernorm" has no style, so its weight is a plain I@tp tensor, but it receives S(1)@tp from "self_attn.o_proj" (mesh axis tp)
        "input_layernorm": SequenceParallel(),
        "self_attn": PrepareModuleInput(
            input_kwarg_layouts={"hidden_states": Shard(1)},
            desired_input_kwarg_layouts={"hidden_states": Replicate()},
        ),
        "self_attn.q_proj": ColwiseParallel(),
        "self_attn.k_proj": ColwiseParallel(),
        "self_attn.v_proj": ColwiseParallel(),
        "self_attn.o_proj": RowwiseParallel(output_layouts=Shard(1)),
        "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "mlp.gate_proj": ColwiseParallel(),
        "mlp.up_proj": ColwiseParallel(),
        "mlp.down_proj": RowwiseParallel(output_layouts=Shard(1)),
    })


def input_layernorm_left_out(layer: LlamaDecoderLayer, tp_mesh: DeviceMesh) -> None:
    parallelize_module(layer, tp_mesh, {  # E: spmd-plan LlamaDecoderLayer.forward: "input_layernorm" has no style, so its weight is a plain I@tp tensor, but it receives S(1)@tp (mesh axis tp)
        "self_attn": PrepareModuleInput(
            input_kwarg_layouts={"hidden_states": Shard(1)},
            desired_input_kwarg_layouts={"hidden_states": Replicate()},
        ),
        "self_attn.q_proj": ColwiseParallel(),
        "self_attn.k_proj": ColwiseParallel(),
        "self_attn.v_proj": ColwiseParallel(),
        "self_attn.o_proj": RowwiseParallel(output_layouts=Shard(1)),
        "post_attention_layernorm": SequenceParallel(),
        "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "mlp.gate_proj": ColwiseParallel(),
        "mlp.up_proj": ColwiseParallel(),
        "mlp.down_proj": RowwiseParallel(output_layouts=Shard(1)),
    })


def tensor_parallel(layer: LlamaDecoderLayer, tp_mesh: DeviceMesh) -> None:
    """The norms keep plain I@tp weights, right on the replicated residual stream (o_proj all-reduces to I@tp)."""
    parallelize_module(layer, tp_mesh, {
        "self_attn.q_proj": ColwiseParallel(),
        "self_attn.k_proj": ColwiseParallel(),
        "self_attn.v_proj": ColwiseParallel(),
        "self_attn.o_proj": RowwiseParallel(),
        "mlp.gate_proj": ColwiseParallel(),
        "mlp.up_proj": ColwiseParallel(),
        "mlp.down_proj": RowwiseParallel(),
    })


class RMSNorm(nn.Module):
    """The llama reference's: the normalisation in a method of its own."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output = self._norm(x.float()).type_as(x)
        return output * self.weight


class ReferenceNormBlock(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(dim)
        self.attention = Attention(dim, heads)
        self.ffn_norm = RMSNorm(dim)
        self.feed_forward = FeedForward(dim, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


def reference_ffn_norm_left_out(block: ReferenceNormBlock, tp_mesh: DeviceMesh) -> None:
    parallelize_module(block, tp_mesh, {  # E: spmd-plan ReferenceNormBlock.forward: "ffn_norm" has no style, so its weight is a plain I@tp tensor, but it receives S(1)@tp from "attention.wo" (mesh axis tp)
        "attention_norm": SequenceParallel(),
        "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attention.w[qkv]": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w[13]": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
    })
