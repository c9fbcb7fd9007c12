"""spmd-plan: a `parallelize_module` plan whose styles do not fit the planned modules' data flow (a colwise output fed to a module that needs the whole input, layouts that disagree between neighbours, a DTensor handed to local code, a key naming no sub-module)."""
from plugin.cases.plans._llama import FeedForward
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


def wrong(ffn: FeedForward, tp_mesh: DeviceMesh) -> None:
    parallelize_module(ffn, tp_mesh, {
        "w1": ColwiseParallel(),
        "w2": ColwiseParallel(),  # E: spmd-plan FeedForward.forward feeds S(-1)@tp from "w1", "w3" to "w2": ColwiseParallel() where I@tp is needed (mesh axis tp)
        "w3": ColwiseParallel(),
    })


def fixed(ffn: FeedForward, tp_mesh: DeviceMesh) -> None:
    parallelize_module(ffn, tp_mesh, {
        "w1": ColwiseParallel(),
        "w2": RowwiseParallel(),
        "w3": ColwiseParallel(),
    })
