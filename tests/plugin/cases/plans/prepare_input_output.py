"""PrepareModuleInputOutput, as torchtitan plans its MoE layer: the sequence shard gathered into a local whole
(use_local_input), the module's pending sum reduce-scattered back to the sequence shard. A feed-forward whose w2
all-reduces already hands on the whole sum, which the output layouts would read as a rank's part of it."""
from plugin.cases.plans._llama import TransformerBlock
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    PrepareModuleInputOutput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


def reduce_scattered_by_the_owner(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    parallelize_module(block, tp_mesh, {
        "attention_norm": SequenceParallel(),
        "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attention.w[qkv]": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "ffn_norm": SequenceParallel(),
        "feed_forward": PrepareModuleInputOutput(
            input_layouts=(Shard(1),),
            desired_input_layouts=(Replicate(),),
            use_local_input=True,
            output_layouts=(Partial(),),
            desired_output_layouts=(Shard(1),),
        ),
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Partial()),
        "feed_forward.w3": ColwiseParallel(),
    })


def all_reduced_twice(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    parallelize_module(block, tp_mesh, {
        "attention_norm": SequenceParallel(),
        "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attention.w[qkv]": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "ffn_norm": SequenceParallel(),
        "feed_forward": PrepareModuleInputOutput(  # E: spmd-plan feed_forward's forward returns I@tp from "feed_forward.w2" to "feed_forward": PrepareModuleInputOutput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),), use_local_input=True, output_layouts=(Partial(),), desired_output_layouts=(Shard(1),)) where P@tp is needed (mesh axis tp)
            input_layouts=(Shard(1),),
            desired_input_layouts=(Replicate(),),
            use_local_input=True,
            output_layouts=(Partial(),),
            desired_output_layouts=(Shard(1),),
        ),
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(),
        "feed_forward.w3": ColwiseParallel(),
    })
