"""wo reduce-scatters (output_layouts=Shard(1)) where the residual stream is whole (no sequence parallelism): the
output all-reduce is missing."""
from plugin.cases.plans._llama import TransformerBlock
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)


def missing_all_reduce(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    parallelize_module(block, tp_mesh, {
        "attention.wq": ColwiseParallel(),
        "attention.wk": ColwiseParallel(),
        "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),  # E: spmd-plan TransformerBlock.forward: "ffn_norm" has no style, so its weight is a plain I@tp tensor, but it receives S(1)@tp from "attention.wo" (mesh axis tp)
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(),
        "feed_forward.w3": ColwiseParallel(),
    })
