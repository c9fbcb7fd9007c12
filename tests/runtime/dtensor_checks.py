"""Checks of the DTensor interop on a 2 dp x 2 tp DeviceMesh, run by the simulated and the gloo world.

Each check takes the world and the mesh (the simulated world's fake mesh, or
``init_device_mesh`` on gloo).  Rank r sits at mesh coordinate
``(r // 2, r % 2)`` (dp, tp).  Values and gradients are compared with the
global meaning computed on one process.
"""

from __future__ import annotations

import torch
from spmd_cases import Parts, World
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, distribute_tensor

import spmd_stubs as spmd
from spmd_stubs import I, P, Pavg, Pmax, Pmin, R, S
from spmd_stubs.axes import dp, tp
from spmd_stubs.core import AxisType, TensorType
from spmd_stubs.types import tensor_type_of

RANKS = range(4)
COORD = {r: {"dp": r // 2, "tp": r % 2} for r in RANKS}
SIZES = {"dp": 2, "tp": 2}
TP_GROUPS = [[0, 1], [2, 3]]


def _close(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(got, want, msg=lambda m: f"{what}: {m}")


def nested_part(full: torch.Tensor, tensor_type: TensorType, coord: dict[str, int], sizes: dict[str, int]) -> torch.Tensor:
    """The part of ``full`` a rank at ``coord`` holds under ``tensor_type``: shard groups nest, major first."""
    part = full
    for dim in range(full.dim()):
        for axis in tensor_type.shard_axes(dim):
            part = part.chunk(sizes[axis], dim)[coord[axis]]
    return part


def _nonnegative(tensor_type: TensorType, ndim: int) -> TensorType:
    """``S(-1)`` as ``S(ndim - 1)``."""
    return TensorType.of(
        {a: t if t.shard is None else AxisType(t.kind, t.shard % ndim, t.order) for a, t in tensor_type.axes}
    )


def _same(value: torch.Tensor) -> Parts:
    return {r: value.clone() for r in RANKS}


def check_layouts(world: World, mesh: DeviceMesh) -> None:
    """distribute_tensor with placements_of(type) puts on each rank the part the type says; and back."""
    full = torch.arange(8.0 * 4).reshape(8, 4)
    for written in [
        (S(0) @ (dp, tp),),
        (S(0) @ (tp, dp),),
        (S(1) @ tp, S(0) @ dp),
        (S(0) @ tp, R @ dp),
        (S(-1) @ (tp, dp),),
    ]:
        tensor_type = tensor_type_of(written)
        placements = spmd.placements_of(tensor_type, mesh)
        dt = distribute_tensor(full, mesh, placements)
        parts = world.parts(dt.to_local())
        normal = _nonnegative(tensor_type, full.dim())
        for rank in RANKS:
            want = nested_part(full, normal, COORD[rank], SIZES)
            _close(parts[rank], want, f"{tensor_type}: rank {rank}'s part under {placements}")
        assert spmd.spmd_type_of(dt.placements, mesh, replicate=R) == normal, (tensor_type, dt.placements)


def check_to_local_gradients(world: World, mesh: DeviceMesh) -> None:
    """R's local gradient is a pending sum (DTensor sums it); I's is already the whole gradient."""
    value = torch.tensor([1.0, 2.0, 3.0])
    per_rank = {r: torch.tensor([1.0, 10.0, 100.0]) * (r + 1) for r in RANKS}
    per_dp = {r: torch.tensor([1.0, -1.0, 0.5]) * (COORD[r]["dp"] + 1) for r in RANKS}
    cases = [
        ((R @ dp, R @ tp), per_rank, sum(per_rank.values())),
        ((I @ dp, I @ tp), _same(per_rank[0]), per_rank[0]),
        # R on dp, I on tp: the use is the same within a tp group, summed over dp.
        ((R @ dp, I @ tp), per_dp, per_dp[0] + per_dp[2]),
    ]
    for written, weights, want in cases:
        x = world.make(_same(value)).requires_grad_()
        dt = DTensor.from_local(x, mesh, [Replicate(), Replicate()])
        y = spmd.to_local(dt, *written)
        (y * world.make(weights)).sum().backward()
        grads = world.parts(x.grad)
        for rank in RANKS:
            _close(grads[rank], want, f"to_local{written}: gradient on rank {rank}")


def _replicated_out(dt: DTensor, mesh: DeviceMesh) -> torch.Tensor:
    """``dt`` redistributed to Replicate everywhere, as a local tensor whose gradient is the whole one (I)."""
    full = dt.redistribute(mesh, [Replicate(), Replicate()])
    return full.to_local(grad_placements=[Replicate(), Replicate()])


def check_from_local_gradients(world: World, mesh: DeviceMesh) -> None:
    """The gradient from_local gives the local tensor is the one its SPMD type asks for."""
    weight = torch.tensor([0.5, -2.0, 3.0, 1.0])
    value = torch.tensor([1.0, 2.0, 2.0, 0.0])
    # R: a pending sum over all four ranks that adds up to the whole gradient.
    x = world.make(_same(value)).requires_grad_()
    y = _replicated_out(spmd.from_local(x, mesh, R @ dp, R @ tp), mesh)
    (y * world.make(_same(weight))).sum().backward()
    grads = world.parts(x.grad)
    _close(sum(grads.values()), weight, "from_local(R@dp, R@tp): the gradients add up to the whole")
    # I: the whole gradient on every rank.
    x = world.make(_same(value)).requires_grad_()
    y = _replicated_out(spmd.from_local(x, mesh, I @ dp, I @ tp), mesh)
    (y * world.make(_same(weight))).sum().backward()
    for rank, grad in world.parts(x.grad).items():
        _close(grad, weight, f"from_local(I@dp, I@tp): gradient on rank {rank}")
    # Pending reductions on tp: each part's gradient is d reduce / d part.
    parts = {r: torch.tensor([[1.0, 2.0, 0.0, 2.0], [3.0, -1.0, 5.0, 2.0]][r % 2]) + 7 * (r // 2) for r in RANKS}
    for pending, reduce in [(P, "sum"), (Pavg, "mean"), (Pmax, "amax"), (Pmin, "amin")]:
        x = world.make(parts).requires_grad_()
        y = _replicated_out(spmd.from_local(x, mesh, I @ dp, pending @ tp), mesh)
        (y * world.make(_same(weight))).sum().backward()
        ys, grads = world.parts(y), world.parts(x.grad)
        for group in TP_GROUPS:
            whole = torch.stack([parts[r] for r in group]).requires_grad_()
            reduced = getattr(torch, reduce)(whole, 0)
            (reduced * weight).sum().backward()
            assert whole.grad is not None
            for k, rank in enumerate(group):
                _close(ys[rank], reduced.detach(), f"{pending}@tp: value on rank {rank}")
                _close(grads[rank], whole.grad[k], f"{pending}@tp: gradient on rank {rank}")


def check_shard_round_trip(world: World, mesh: DeviceMesh) -> None:
    """from_local(S(0)@(tp, dp)) -> the global tensor the nested order says; gradients back to the parts."""
    full = torch.arange(8.0 * 3).reshape(8, 3)
    weight = torch.linspace(-1, 1, 24).reshape(8, 3)
    tensor_type = tensor_type_of((S(0) @ (tp, dp),))
    x = world.make({r: nested_part(full, tensor_type, COORD[r], SIZES) for r in RANKS}).requires_grad_()
    dt = spmd.from_local(x, mesh, S(0) @ (tp, dp))
    back = spmd.to_local(dt, S(0) @ (tp, dp))
    _close(world.parts(back)[1], nested_part(full, tensor_type, COORD[1], SIZES), "to_local(from_local(x)) is x")
    y = _replicated_out(dt, mesh)
    (y * world.make(_same(weight))).sum().backward()
    ys, grads = world.parts(y), world.parts(x.grad)
    for rank in RANKS:
        _close(ys[rank], full, f"the global tensor on rank {rank}")
        _close(grads[rank], nested_part(weight, tensor_type, COORD[rank], SIZES), f"gradient on rank {rank}")


def check_pmax_through_collectives(world: World, mesh: DeviceMesh) -> None:
    """from_local(Pmax) -> to_local(Pmax) -> all_reduce(Pmax, I): gradients are amax's, ties split."""
    parts = {r: torch.tensor([[1.0, 2.0, 2.0, 0.0], [2.0, 2.0, 1.0, 0.0]][r % 2]) * (r // 2 + 1) for r in RANKS}
    weight = torch.tensor([1.0, -3.0, 2.0, 4.0])
    x = world.make(parts).requires_grad_()
    dt = spmd.from_local(x, mesh, I @ dp, Pmax @ tp)
    local = spmd.to_local(dt, I @ dp, Pmax @ tp)
    y = spmd.all_reduce(local, tp, src=Pmax, dst=I)
    (y * world.make(_same(weight))).sum().backward()
    ys, grads = world.parts(y), world.parts(x.grad)
    for group in TP_GROUPS:
        whole = torch.stack([parts[r] for r in group]).requires_grad_()
        reduced = torch.amax(whole, 0)
        (reduced * weight).sum().backward()
        assert whole.grad is not None
        for k, rank in enumerate(group):
            _close(ys[rank], reduced.detach(), f"value on rank {rank}")
            _close(grads[rank], whole.grad[k], f"gradient on rank {rank}")


def check_replicate_choice(world: World, mesh: DeviceMesh) -> None:
    """grad_placements decide R vs I the way DTensor's to_local is told."""
    assert spmd.spmd_type_of([Replicate(), Replicate()], mesh, grad_placements=[Partial(), Replicate()]) == (
        tensor_type_of((R @ dp, I @ tp))
    )
    assert spmd.spmd_type_of([Replicate(), Replicate()], mesh, replicate={dp: I, "tp": R}) == tensor_type_of(
        (I @ dp, R @ tp)
    )
    assert spmd.grad_placements_of((R @ dp, I @ tp), mesh) == (Partial(), Replicate())
    assert spmd.grad_placements_of((P @ dp, Pmax @ tp), mesh) == (Replicate(), Partial())


CHECKS = {
    fn.__name__: fn
    for fn in (
        check_layouts,
        check_to_local_gradients,
        check_from_local_gradients,
        check_shard_round_trip,
        check_pmax_through_collectives,
        check_replicate_choice,
    )
}
