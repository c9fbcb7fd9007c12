"""Strict mode: a DTensor local_map whose placements are not read says that its body is checked without them."""
import torch
from torch.distributed.tensor import DeviceMesh, DTensor, Replicate, Shard
from torch.distributed.tensor.experimental import local_map


def mesh_not_named(mesh: DeviceMesh, x: DTensor) -> DTensor:
    @local_map(  # E: spmd-untyped-boundary local_map's placements or mesh axes are not all read
        out_placements=[Shard(0)], in_placements=([Shard(0)],), device_mesh=mesh)
    def doubled(x: torch.Tensor) -> torch.Tensor:
        return 2 * x

    return doubled(x)


def mesh_named(mesh: DeviceMesh, x: DTensor) -> DTensor:
    @local_map(out_placements=[Shard(0)], in_placements=([Shard(0)],), device_mesh=mesh["tp"])
    def doubled(x: torch.Tensor) -> torch.Tensor:
        return 2 * x

    return doubled(x)


ROWS = [Shard(0)]


def placements_in_a_variable(mesh: DeviceMesh, x: DTensor, w: DTensor) -> DTensor:
    @local_map(out_placements=ROWS, in_placements=([Replicate()], ROWS), device_mesh=mesh["tp"])  # E: spmd-untyped-boundary not all read
    def project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w.T

    return project(x, w)
