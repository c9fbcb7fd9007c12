"""spmd-local-map: a DTensor `local_map` whose placements give an input a type its body breaks (a replicated input used with a tensor-parallel weight, its gradient left to be read as whole), no type at all, or one its annotation contradicts."""
import torch
from torch.distributed.tensor import DeviceMesh, DTensor, Partial, Replicate, Shard
from torch.distributed.tensor.experimental import local_map


def wrong(mesh: DeviceMesh, x: DTensor, w: DTensor) -> DTensor:
    @local_map(out_placements=[Shard(1)], in_placements=([Replicate()], [Shard(0)]), device_mesh=mesh["tp"])  # E: spmd-local-map Fix: in_grad_placements=([Partial()], [Shard(0)])
    def project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w.T

    return project(x, w)


def fixed(mesh: DeviceMesh, x: DTensor, w: DTensor) -> DTensor:
    @local_map(out_placements=[Shard(1)], in_placements=([Replicate()], [Shard(0)]),
               in_grad_placements=([Partial()], [Shard(0)]), device_mesh=mesh["tp"])
    def project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w.T

    return project(x, w)
