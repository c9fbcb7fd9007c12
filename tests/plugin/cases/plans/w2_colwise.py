"""w2 colwise: the FFN's colwise outputs (this rank's hidden columns) feed another colwise, which needs the whole."""
from plugin.cases.plans._llama import Transformer
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


def w2_colwise(model: Transformer, tp_mesh: DeviceMesh) -> None:
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
        "feed_forward.w2": ColwiseParallel(),  # E: spmd-plan FeedForward.forward feeds S(-1)@tp from "feed_forward.w1", "feed_forward.w3" to "feed_forward.w2": ColwiseParallel() where I@tp is needed (mesh axis tp)
        "feed_forward.w3": ColwiseParallel(),
    }
    for block in model.layers.values():
        parallelize_module(block, tp_mesh, layer_plan)
