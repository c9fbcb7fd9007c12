"""use_local_output: a DTensor handed to code that adds it to a local tensor (torch refuses), and a local sequence
shard handed to colwise modules that read it as the whole sequence."""
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


def dtensor_into_the_residual(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    parallelize_module(block, tp_mesh, {
        "attention_norm": SequenceParallel(),
        "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attention.w[qkv]": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),  # E: spmd-plan TransformerBlock.forward: add meets a DTensor from "attention.wo" with a local tensor S(1)@tp (mesh axis tp)
        "ffn_norm": SequenceParallel(),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w[13]": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
    })


def local_shard_into_colwise(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    parallelize_module(block, tp_mesh, {
        "attention_norm": SequenceParallel(use_local_output=True),  # E: spmd-plan Attention.forward feeds S(1)@tp from "attention_norm" to "attention.w[qkv]": ColwiseParallel() where I@tp is needed (mesh axis tp)
        "attention.w[qkv]": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "ffn_norm": SequenceParallel(),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w[13]": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
    })
