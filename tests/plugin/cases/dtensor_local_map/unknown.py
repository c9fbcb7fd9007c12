"""DTensor local_map: what is not written out stays unknown, and callers' local tensors meet the inputs' types."""
import torch
from torch.distributed.tensor import DeviceMesh, DTensor, Partial, Replicate, Shard
from torch.distributed.tensor.experimental import local_map

from spmd_stubs import I, R, S, Tensor
from spmd_stubs.axes import tp

ROWS = [Shard(0)]


def placements_in_a_variable(mesh: DeviceMesh, x: DTensor, w: DTensor) -> DTensor:
    """An input whose placements are a name is unknown: its parameter keeps its annotation, and the result
    keeps the def's (an unknown input may make it anything)."""
    @local_map(out_placements=[Shard(1)], in_placements=([Replicate()], ROWS), device_mesh=mesh["tp"])
    def project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w.T

    return project(x, w)


def mesh_not_named(mesh: DeviceMesh, x: DTensor, w: DTensor) -> DTensor:
    """A mesh whose axes are not known (not mesh["tp"], and current_mesh has two) leaves the region unread."""
    @local_map(out_placements=[Shard(1)], in_placements=([Replicate()], [Shard(0)]), device_mesh=mesh)
    def project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w.T

    return project(x, w)


def tp_mesh_names_tp(tp_mesh: DeviceMesh, x: DTensor, w: DTensor) -> DTensor:
    @local_map(  # E: spmd-local-map `x` is I@tp where its body needs R@tp
        out_placements=[Shard(1)], in_placements=([Replicate()], [Shard(0)]), device_mesh=tp_mesh)
    def project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w.T

    return project(x, w)


def current_mesh(mesh: DeviceMesh, x: DTensor, w: DTensor) -> DTensor:
    """Two placements per tensor on an unnamed mesh: the dims are current_mesh's (dp, tp)."""
    @local_map(  # E: spmd-local-map `x` is I@tp where its body needs R@tp
        out_placements=[Shard(0), Shard(1)], in_placements=([Shard(0), Replicate()], [Replicate(), Shard(0)]),
        in_grad_placements=([Shard(0), Replicate()], [Partial(), Shard(0)]), device_mesh=mesh)
    def project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w.T

    @local_map(
        out_placements=[Shard(0), Shard(1)], in_placements=([Shard(0), Replicate()], [Replicate(), Shard(0)]),
        in_grad_placements=([Shard(0), Partial()], [Partial(), Shard(0)]), device_mesh=mesh)
    def project_fixed(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w.T

    return project(x, w) + project_fixed(x, w)


def local_arguments(mesh: DeviceMesh, rows: Tensor[S(0)@tp], whole: Tensor[I@tp], used: Tensor[R@tp]) -> None:
    """A local tensor reaches the body as it is: its type must be the input's (a DTensor is taken as it is)."""
    @local_map(out_placements=[Shard(0)], in_placements=([Shard(0)], [Replicate()]),
               in_grad_placements=([Shard(0)], [Partial()]), device_mesh=mesh["tp"])
    def rows_by(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w.T

    rows_by(rows, whole)  # E: arg-type incompatible type "Tensor[I@tp]"; expected "Tensor[R@tp] | None"
    rows_by(rows, used)


def odd_inputs(mesh: DeviceMesh, x: DTensor, w: DTensor, k: int, name: str) -> None:
    """Nothing here is read, and nothing raises."""
    local_map(lambda t: t, [Shard(0)], ([Shard(0)],), None, mesh["tp"])(x)
    local_map(torch.relu, [Shard(0)], ([Shard(k)],), None, mesh["tp"])(x)
    local_map(torch.relu, [Shard(0)], ([Shard(0)],), ([Shard(0)], [Shard(0)]), mesh["tp"])(x)

    @local_map(out_placements=[Shard(0)], in_placements=([Shard(0), Shard(1)],), device_mesh=mesh["tp"])
    def too_many_dims(x: torch.Tensor) -> torch.Tensor:
        return x

    @local_map(out_placements=[Shard(0)], in_placements=([Shard(0)], [Shard(0)]), device_mesh=mesh["tp"])
    def too_few_parameters(x: torch.Tensor) -> torch.Tensor:
        return x

    @local_map(out_placements=[Partial("max")], in_placements=([Partial("max")],), device_mesh=mesh[name])
    def unknown_partial(x: torch.Tensor) -> torch.Tensor:
        return x

    @local_map(out_placements=[], in_placements=(), device_mesh=mesh["tp"])
    def nothing() -> None:
        return None

    grads = ([Shard(0)],)
    local_map(torch.relu, None, None, grads, None)(x)
    local_map(torch.relu, [Shard(0)], ([Shard(0)],), grads, mesh["tp"])(x)
    local_map()(torch.relu)(x)

    @local_map(out_placements=([Shard(0)], [Shard(0)]), in_placements=([Shard(0)],), device_mesh=mesh["tp"])
    def nested_results(x: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor]]:
        return x, (x,)

    @local_map(out_placements=[Shard(0)], in_placements=([Shard(0)], None), device_mesh=mesh["tp"])
    def with_a_number(x: torch.Tensor, k: int, eps: float = 1e-5) -> torch.Tensor:
        return x * k + eps
