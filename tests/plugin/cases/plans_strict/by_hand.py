"""A norm left without SequenceParallel whose weight's gradient the training step all-reduces over tp by hand after
backward: the parts each rank's tokens give are summed, the gradient is right (its weight R@tp, not plain I@tp).
Reduced before backward it is reported as left out; reduced where the norm sees the whole activations, it counts
the gradient once per rank."""
import torch
import torch.distributed as dist
from plugin.cases.plans._llama import TransformerBlock
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


def train_step(block: TransformerBlock, tp_mesh: DeviceMesh, x: torch.Tensor) -> None:
    parallelize_module(block, tp_mesh, {
        "attention_norm": SequenceParallel(),
        "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attention.w[qkv]": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w[13]": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
    })
    block(x).sum().backward()
    for p in block.ffn_norm.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, group=tp_mesh.get_group())


def reduced_before_backward(block: TransformerBlock, tp_mesh: DeviceMesh, x: torch.Tensor) -> None:
    tp_group = tp_mesh.get_group()
    parallelize_module(block, tp_mesh, {  # E: spmd-plan TransformerBlock.forward: "ffn_norm" has no style, so its weight is a plain I@tp tensor, but it receives S(1)@tp from "attention.wo" (mesh axis tp)
        "attention_norm": SequenceParallel(),
        "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attention.w[qkv]": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w[13]": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
    })
    for p in block.ffn_norm.parameters():
        dist.all_reduce(p.grad, group=tp_group)
    block(x).sum().backward()


def reduced_where_the_norm_sees_everything(block: TransformerBlock, tp_mesh: DeviceMesh, x: torch.Tensor) -> None:
    parallelize_module(block, tp_mesh, {  # E: spmd-plan TransformerBlock.forward: the weight of "ffn_norm" has its gradient all-reduced over tp by hand (line 60), which makes it R@tp, but "ffn_norm" receives I@tp from "attention.wo" (mesh axis tp)
        "attention.w[qkv]": ColwiseParallel(),
        "attention.wo": RowwiseParallel(),
        "feed_forward.w[13]": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(),
    })
    loss = block(x).sum()
    loss.backward()
    for p in block.ffn_norm.parameters():
        dist.all_reduce(p.grad, group=tp_mesh.get_group())
