"""A linear left without a style behind colwise ones: its plain I@tp weight meets this rank's columns, so its
gradient covers only them."""
from plugin.cases.plans._llama import FeedForward
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


def w2_left_out(ffn: FeedForward, tp_mesh: DeviceMesh) -> None:
    parallelize_module(ffn, tp_mesh, {  # E: spmd-plan FeedForward.forward: "w2" has no style, so its weight is a plain I@tp tensor, but it receives S(-1)@tp from "w1", "w3" (mesh axis tp)
        "w1": ColwiseParallel(),
        "w3": ColwiseParallel(),
    })


def fixed(ffn: FeedForward, tp_mesh: DeviceMesh) -> None:
    parallelize_module(ffn, tp_mesh, {"w1": ColwiseParallel(), "w2": RowwiseParallel(), "w3": ColwiseParallel()})
