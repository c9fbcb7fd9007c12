"""A plan built by a function that serves two configurations: a mistake in it is reported where the plan is
passed, its fix named but left to the user (checked for this configuration only; the other reads that code too)."""
from plugin.cases.plans._llama import TransformerBlock
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


def layer_plan(sequence_parallel: bool) -> dict[str, ParallelStyle]:
    plan: dict[str, ParallelStyle] = {
        "attention.w[qkv]": ColwiseParallel(),
        "attention.wo": RowwiseParallel(),
        "feed_forward.w[13]": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(),
    }
    if sequence_parallel:
        plan.update({
            "attention_norm": SequenceParallel(),
            "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
        })
    return plan


def sequence_parallel(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    parallelize_module(block, tp_mesh, layer_plan(True))  # E: spmd-plan TransformerBlock.forward: "ffn_norm" has no style, so its weight is a plain I@tp tensor, but it receives S(1)@tp from "attention.wo" (mesh axis tp)


def tensor_parallel(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    parallelize_module(block, tp_mesh, layer_plan(False))
