"""A sequence-parallel plan that leaves a norm out: its weight stays a plain tensor, whose gradient sums only this
rank's tokens (the norm runs on the local sequence shard), while nothing reduces it across tp."""
from plugin.cases.plans._llama import TransformerBlock
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


def ffn_norm_left_out(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    parallelize_module(block, tp_mesh, {  # E: spmd-plan TransformerBlock.forward: "ffn_norm" has no style, so its weight is a plain I@tp tensor, but it receives S(1)@tp from "attention.wo" (mesh axis tp)
        "attention_norm": SequenceParallel(),
        "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attention.w[qkv]": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w[13]": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
    })


def attention_norm_left_out(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    parallelize_module(block, tp_mesh, {  # E: spmd-plan TransformerBlock.forward: "attention_norm" has no style, so its weight is a plain I@tp tensor, but it receives S(1)@tp (mesh axis tp)
        "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attention.w[qkv]": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "ffn_norm": SequenceParallel(),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w[13]": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
    })


class UnweightedNormBlock(TransformerBlock):
    """The block with norms that hold no parameters: nothing of theirs needs a style."""

    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__(dim, heads, hidden)
        self.attention_norm = nn.RMSNorm(dim, elementwise_affine=False)
        self.ffn_norm = nn.RMSNorm(dim, eps=1e-6, elementwise_affine=False)


def unweighted_norms_need_no_style(block: UnweightedNormBlock, tp_mesh: DeviceMesh) -> None:
    parallelize_module(block, tp_mesh, {
        "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attention.w[qkv]": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w[13]": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
    })


def planned_elsewhere(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    """The norms get their style from a second plan: neither plan alone says their parameters are plain."""
    parallelize_module(block, tp_mesh, {"attention_norm": SequenceParallel(), "ffn_norm": SequenceParallel()})
    parallelize_module(block, tp_mesh, {
        "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attention.w[qkv]": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w[13]": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
    })
