"""Clean plans: sequence parallel (torchtitan's llama plan, per block in a loop) and plain tensor parallel."""
from plugin.cases.plans._llama import Transformer, TransformerBlock
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


def sequence_parallel(model: Transformer, tp_mesh: DeviceMesh) -> None:
    layer_plan = {
        "attention_norm": SequenceParallel(),
        "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attention.wq": ColwiseParallel(),
        "attention.wk": ColwiseParallel(),
        "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "ffn_norm": SequenceParallel(),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
        "feed_forward.w3": ColwiseParallel(),
    }
    for block in model.layers.values():
        parallelize_module(block, tp_mesh, layer_plan)


def tensor_parallel(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    """The norms keep plain I@tp weights, right on the replicated residual stream (wo all-reduces to I@tp)."""
    parallelize_module(block, tp_mesh, {
        "attention.w[qkv]": ColwiseParallel(),
        "attention.wo": RowwiseParallel(),
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(),
        "feed_forward.w3": ColwiseParallel(),
    })


def whole_model(model: Transformer, tp_mesh: DeviceMesh) -> None:
    parallelize_module(model, tp_mesh, {
        "layers.*.attention.wq": ColwiseParallel(),
        "layers.*.attention.wk": ColwiseParallel(),
        "layers.*.attention.wv": ColwiseParallel(),
        "layers.*.attention.wo": RowwiseParallel(),
        "layers.*.feed_forward.w1": ColwiseParallel(),
        "layers.*.feed_forward.w2": RowwiseParallel(),
        "layers.*.feed_forward.w3": ColwiseParallel(),
    })
