"""DTensor local_map: a replicated input whose body uses it with a tensor-parallel weight needs its gradient
read as Partial(), else each rank keeps only its own term of the gradient (tests/runtime/test_dtensor_local_map_gloo.py)."""
import torch
from torch.distributed.tensor import DeviceMesh, DTensor, Partial, Replicate, Shard
from torch.distributed.tensor.experimental import local_map


def colwise(mesh: DeviceMesh, x: DTensor, w: DTensor) -> DTensor:
    @local_map(  # E: spmd-local-map in_placements Replicate() with its gradient read as Replicate() (in_grad_placements left out) takes the body's gradient as the whole gradient on every rank, but the body's gradient is this rank's term of a sum. Fix: in_grad_placements=([Partial()], [Shard(0)])
        out_placements=[Shard(1)], in_placements=([Replicate()], [Shard(0)]), device_mesh=mesh["tp"])
    def project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w.T

    return project(x, w)


def colwise_fixed(mesh: DeviceMesh, x: DTensor, w: DTensor) -> DTensor:
    @local_map(out_placements=[Shard(1)], in_placements=([Replicate()], [Shard(0)]),
               in_grad_placements=([Partial()], [Shard(0)]), device_mesh=mesh["tp"])
    def project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w.T

    return project(x, w)


def project_rows(x, w):
    return x @ w.T


def call_form(mesh: DeviceMesh, x: DTensor, w: DTensor) -> DTensor:
    """An unannotated def wrapped by a call: checked with its region's types all the same."""
    region = local_map(project_rows, [Shard(1)], ([Replicate()], [Shard(0)]), None, mesh["tp"])  # E: spmd-local-map `x` is I@tp where its body needs R@tp
    return region(x, w)


def call_form_fixed(mesh: DeviceMesh, x: DTensor, w: DTensor) -> DTensor:
    region = local_map(project_rows, [Shard(1)], ([Replicate()], [Shard(0)]), ([Partial()], [Shard(0)]), mesh["tp"])
    return region(x, w)


def whole_work(mesh: DeviceMesh, x: DTensor, w: DTensor) -> DTensor:
    """The other way round: the same work on every rank, its gradient read as a sum, counts once per rank."""
    @local_map(  # E: spmd-local-map in_placements Replicate() with its gradient read as Partial() takes the body's gradient as this rank's term of a sum, but the body's gradient is the whole gradient on every rank. Fix: in_grad_placements=([Replicate()], [Replicate()])
        out_placements=[Replicate()], in_placements=([Replicate()], [Replicate()]),
        in_grad_placements=([Partial()], [Replicate()]), device_mesh=mesh["tp"])
    def project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w.T

    return project(x, w)


def whole_work_fixed(mesh: DeviceMesh, x: DTensor, w: DTensor) -> DTensor:
    @local_map(out_placements=[Replicate()], in_placements=([Replicate()], [Replicate()]), device_mesh=mesh["tp"])
    def project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w.T

    return project(x, w)
