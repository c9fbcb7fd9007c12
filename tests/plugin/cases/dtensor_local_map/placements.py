"""DTensor local_map: each placement pair's type in the body, the results' types, pairs that are no type."""
import torch
from torch.distributed.tensor import DeviceMesh, DTensor, Partial, Replicate, Shard
from torch.distributed.tensor.experimental import local_map

from spmd_stubs import I, P, R, Tensor, all_reduce
from spmd_stubs.axes import tp


def sharded(mesh: DeviceMesh, x: DTensor, w: DTensor) -> DTensor:
    """Shard(0) in and out: each rank's rows, S(0)@tp.  A whole weight applied to them gets this rank's rows'
    part of its gradient: R, whose gradient DTensor must sum."""
    @local_map(  # E: spmd-local-map in_placements Replicate() with its gradient read as Replicate() (in_grad_placements left out) takes the body's gradient as the whole gradient on every rank, but the body's gradient is this rank's term of a sum. Fix: in_grad_placements=([Shard(0)], [Partial()])
        out_placements=[Shard(0)], in_placements=([Shard(0)], [Replicate()]), device_mesh=mesh["tp"])
    def rows(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ w.T)

    return rows(x, w)


def sharded_fixed(mesh: DeviceMesh, x: DTensor, w: DTensor) -> DTensor:
    @local_map(out_placements=[Shard(0)], in_placements=([Shard(0)], [Replicate()]),
               in_grad_placements=([Shard(0)], [Partial()]), device_mesh=mesh["tp"])
    def rows(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ w.T)

    return rows(x, w)


def partial_in(mesh: DeviceMesh, x: DTensor) -> DTensor:
    """Partial() in, its gradient read whole by default: P@tp, which a linear op keeps; a nonlinear one needs the
    sum first."""
    @local_map(out_placements=[Partial()], in_placements=([Partial()],), device_mesh=mesh["tp"])
    def scaled(x: torch.Tensor) -> torch.Tensor:
        return 3 * x

    @local_map(out_placements=[Replicate()], in_placements=([Partial()],), device_mesh=mesh["tp"])
    def activated_fixed(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(all_reduce(x, tp, src=P, dst=I))

    return scaled(x) + activated_fixed(x)


def partial_read_as_partial(mesh: DeviceMesh, x: DTensor) -> DTensor:
    """A pending sum's gradient is the whole one on every rank: read as Partial(), DTensor counts it once per rank."""
    @local_map(  # E: spmd-local-map in_placements Partial() with its gradient read as Partial() is none of R, I, V, P, S(d), so no gradient its body computes is read as it is meant. Fix: in_grad_placements=([Replicate()],)
        out_placements=[Partial()], in_placements=([Partial()],), in_grad_placements=([Partial()],),
        device_mesh=mesh["tp"])
    def scaled(x: torch.Tensor) -> torch.Tensor:
        return 3 * x

    return scaled(x)


def partial_read_as_partial_fixed(mesh: DeviceMesh, x: DTensor) -> DTensor:
    @local_map(out_placements=[Partial()], in_placements=([Partial()],), in_grad_placements=([Replicate()],),
               device_mesh=mesh["tp"])
    def scaled(x: torch.Tensor) -> torch.Tensor:
        return 3 * x

    return scaled(x)


def shard_read_as_replicate(mesh: DeviceMesh, x: DTensor) -> DTensor:
    @local_map(  # E: spmd-local-map in_placements Shard(0) with its gradient read as Replicate() is none of R, I, V, P, S(d), so no gradient its body computes is read as it is meant. Fix: in_grad_placements=([Shard(0)],)
        out_placements=[Shard(0)], in_placements=([Shard(0)],), in_grad_placements=([Replicate()],),
        device_mesh=mesh["tp"])
    def doubled(x: torch.Tensor) -> torch.Tensor:
        return 2 * x

    return doubled(x)


def shard_read_as_replicate_fixed(mesh: DeviceMesh, x: DTensor) -> DTensor:
    @local_map(out_placements=[Shard(0)], in_placements=([Shard(0)],), device_mesh=mesh["tp"])
    def doubled(x: torch.Tensor) -> torch.Tensor:
        return 2 * x

    return doubled(x)


def result_not_replicated(mesh: DeviceMesh, x: DTensor, w: DTensor) -> DTensor:
    """Replicate() out is I: a column-parallel result is this rank's columns, not the whole."""
    @local_map(out_placements=[Replicate()], in_placements=([Replicate()], [Shard(0)]),
               in_grad_placements=([Partial()], [Shard(0)]), device_mesh=mesh["tp"])
    def project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w.T  # E: return-value got "Tensor[V@tp]", expected "Tensor[I@tp]"

    return project(x, w)


def result_not_replicated_fixed(mesh: DeviceMesh, x: DTensor, w: DTensor) -> DTensor:
    @local_map(out_placements=[Shard(1)], in_placements=([Replicate()], [Shard(0)]),
               in_grad_placements=([Partial()], [Shard(0)]), device_mesh=mesh["tp"])
    def project(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w.T

    return project(x, w)


def several_results(mesh: DeviceMesh, x: DTensor, w: DTensor, scale: DTensor) -> tuple[DTensor, DTensor]:
    """A tuple of placement lists: one per result, None for a non-tensor."""
    @local_map(out_placements=([Shard(1)], [Replicate()], None), in_placements=([Replicate()], [Shard(0)], [Replicate()]),
               in_grad_placements=([Partial()], [Shard(0)], [Replicate()]), device_mesh=mesh["tp"])
    def project(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
        return x @ w.T, x, 0  # E: return-value got "tuple[Tensor[V@tp], Tensor[R@tp], int]", expected "tuple[Tensor[S(1)@tp], Tensor[I@tp], int]"

    @local_map(out_placements=([Shard(1)], [Replicate()], None), in_placements=([Replicate()], [Shard(0)], [Replicate()]),
               in_grad_placements=([Partial()], [Shard(0)], [Replicate()]), device_mesh=mesh["tp"])
    def project_fixed(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
        return x @ w.T, 2 * scale, 0

    y, _, _ = project(x, w, scale)
    return y, project_fixed(x, w, scale)[1]


def declared(mesh: DeviceMesh, x: DTensor) -> DTensor:
    """A parameter that declares its type must agree with its placements; the fix keeps the body clean."""
    @local_map(  # E: spmd-local-map (in_grad_placements left out). Fix (needs your choice): declare `x` as I@tp
        out_placements=[Replicate()], in_placements=([Replicate()],), device_mesh=mesh["tp"])
    def doubled(x: Tensor[R@tp]) -> torch.Tensor:
        return 2 * x  # E: return-value got "Tensor[R@tp]", expected "Tensor[I@tp]"

    @local_map(  # E: spmd-local-map local_map input `x` is declared R@tp but its placements make it I@tp
        out_placements=[Shard(0)], in_placements=([Replicate()], [Shard(0)]), device_mesh=mesh["tp"])
    def rows(x: Tensor[R@tp], w: torch.Tensor) -> torch.Tensor:
        return w @ x

    @local_map(out_placements=[Replicate()], in_placements=([Replicate()],), device_mesh=mesh["tp"])
    def doubled_fixed(x: Tensor[I@tp]) -> torch.Tensor:
        return 2 * x

    @local_map(out_placements=[Shard(0)], in_placements=([Replicate()], [Shard(0)]),
               in_grad_placements=([Partial()], [Shard(0)]), device_mesh=mesh["tp"])
    def rows_fixed(x: Tensor[R@tp], w: torch.Tensor) -> torch.Tensor:
        return w @ x

    return rows_fixed(doubled_fixed(doubled(x)), x) + rows(x, x)
