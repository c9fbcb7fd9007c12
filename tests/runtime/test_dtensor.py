"""DTensor interop (spmd_stubs.dtensor): layouts, gradients and errors.

The world checks (``dtensor_checks``) run here on the simulated 2 x 2 mesh
and in ``test_dtensor_gloo`` on 4 gloo ranks.  The layout tests below use
DTensor's own splitting code on meshes of any shape (a ``DeviceMesh`` built
without process groups: only its shape is used).
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from dtensor_checks import CHECKS
from spmd_world import SimWorld
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torch.distributed.tensor._dtensor_spec import DTensorSpec
from torch.distributed.tensor.placement_types import _MaskPartial, _StridedShard

import spmd_stubs as spmd
from spmd_stubs import I, P, Pavg, Pmax, Pmin, R, S, V, core
from spmd_stubs.axes import dp, tp
from spmd_stubs.core import TensorType


@pytest.mark.parametrize("name", list(CHECKS))
def test_sim(sim: SimWorld, fake_mesh: DeviceMesh, name: str) -> None:
    CHECKS[name](sim, fake_mesh)


# --------------------------------------------------------------------------
# Layouts on meshes of any shape, against DTensor's own splitting
# --------------------------------------------------------------------------

MESHES = [(2, 3, 4), (2, 2, 2), (4, 1, 2), (3, 2)]


def _mesh(shape: tuple[int, ...]) -> DeviceMesh:
    names = tuple("abcd"[: len(shape)])
    return DeviceMesh("cpu", torch.arange(math.prod(shape)).reshape(shape), mesh_dim_names=names, _init_backend=False)


def _dtensor_part(full: torch.Tensor, placements: tuple, shape: tuple[int, ...], coord: tuple[int, ...]) -> torch.Tensor:
    """The local tensor DTensor's placements give the rank at ``coord`` (placements applied in mesh order)."""
    part = full
    for mesh_dim, placement in enumerate(placements):
        if isinstance(placement, (Shard, _StridedShard)):
            chunks, _ = placement._split_tensor(part, shape[mesh_dim], with_padding=False)
            part = chunks[coord[mesh_dim]]
    return part


def _nested_part(full: torch.Tensor, major_first: list[int], shape: tuple[int, ...], coord: tuple[int, ...]) -> torch.Tensor:
    for mesh_dim in major_first:
        full = full.chunk(shape[mesh_dim], 0)[coord[mesh_dim]]
    return full


def _groups(shape: tuple[int, ...]) -> list[list[int]]:
    """Every ordered choice of at least two mesh dims (the others replicate)."""
    dims = range(len(shape))
    return [list(p) for k in range(2, len(shape) + 1) for c in itertools.combinations(dims, k) for p in itertools.permutations(c)]


@pytest.mark.parametrize("shape", MESHES, ids=str)
def test_every_shard_order_is_the_layout_dtensor_gives(fake_mesh: DeviceMesh, shape: tuple[int, ...]) -> None:
    """S(0)@(order...) -> placements_of -> DTensor's split == the nested split in that order; and back."""
    mesh = _mesh(shape)
    names = mesh.mesh_dim_names
    assert names is not None
    full = torch.arange(float(2 * math.prod(shape)))
    for major_first in _groups(shape):
        tensor_type = TensorType.of(
            {
                **{names[d]: core.Shard(0, order) for order, d in enumerate(major_first)},
                **{names[d]: core.Replicate for d in range(len(shape)) if d not in major_first},
            }
        )
        placements = spmd.placements_of(tensor_type, mesh)
        for coord in itertools.product(*map(range, shape)):
            got = _dtensor_part(full, placements, shape, coord)
            want = _nested_part(full, major_first, shape, coord)
            assert torch.equal(got, want), (tensor_type, placements, coord)
        back = spmd.spmd_type_of(placements, mesh, replicate=R)
        # Size-1 mesh dims split nothing: any position is the same layout.
        if all(shape[d] > 1 for d in major_first):
            assert back == tensor_type, (placements, back)
            order = DTensorSpec._maybe_convert_StridedShard_to_shard_order(placements, mesh)
            assert order is not None and tuple(order[0].mesh_dims) == tuple(major_first)
        else:
            assert spmd.placements_of(back, mesh) == placements


def test_strided_shard_of_the_fsdp_tp_layout(fake_mesh: DeviceMesh) -> None:
    """DTensor's documented example: [_StridedShard(0, sf=2), Shard(0)] on (dp, tp) is S(0)@(tp, dp)."""
    placements = (_StridedShard(0, split_factor=2), Shard(0))
    assert str(spmd.spmd_type_of(placements, fake_mesh)) == "S(0)@(tp,dp)"
    assert spmd.placements_of((S(0) @ (tp, dp),), fake_mesh) == placements
    assert spmd.placements_of((S(0) @ (dp, tp),), fake_mesh) == (Shard(0), Shard(0))


# --------------------------------------------------------------------------
# Placements <-> types, and the errors
# --------------------------------------------------------------------------


def test_placements_of_each_type(fake_mesh: DeviceMesh) -> None:
    assert spmd.placements_of((R @ dp, I @ tp), fake_mesh) == (Replicate(), Replicate())
    assert spmd.placements_of((S(1) @ dp, S(-1) @ tp), fake_mesh) == (Shard(1), Shard(-1))
    assert spmd.placements_of((P @ dp, Pavg @ tp), fake_mesh) == (Partial("sum"), Partial("avg"))
    assert spmd.placements_of((Pmax @ dp, Pmin @ tp), fake_mesh) == (Partial("max"), Partial("min"))
    assert spmd.placements_of(TensorType.parse("S(0)@(tp,dp)"), fake_mesh) == (_StridedShard(0, split_factor=2), Shard(0))


def test_spmd_type_of_each_placement(fake_mesh: DeviceMesh) -> None:
    assert str(spmd.spmd_type_of([Shard(1), Partial("max")], fake_mesh)) == "S(1)@dp, Pmax@tp"
    assert str(spmd.spmd_type_of([Partial(), Partial("avg")], fake_mesh)) == "P@dp, Pavg@tp"
    assert str(spmd.spmd_type_of([Replicate(), Partial("min")], fake_mesh, replicate=I)) == "I@dp, Pmin@tp"
    assert str(spmd.spmd_type_of([Shard(0), Shard(0)], fake_mesh)) == "S(0)@(dp,tp)"


def test_replicate_needs_the_choice(fake_mesh: DeviceMesh) -> None:
    with pytest.raises(ValueError, match=r"Replicate\(\), which is R@tp or I@tp.*replicate=R.*replicate=I"):
        spmd.spmd_type_of([Shard(0), Replicate()], fake_mesh)
    with pytest.raises(ValueError, match="replicate= says R@tp but the gradient placement"):
        spmd.spmd_type_of([Shard(0), Replicate()], fake_mesh, replicate=R, grad_placements=[Shard(0), Replicate()])
    with pytest.raises(ValueError, match="replicate= takes R or I"):
        spmd.spmd_type_of([Replicate(), Replicate()], fake_mesh, replicate=P)
    with pytest.raises(ValueError, match="gradient is Partial"):
        spmd.spmd_type_of([Replicate(), Replicate()], fake_mesh, grad_placements=[Shard(0), Replicate()])


def test_gradient_placement_must_match_shard_and_partial(fake_mesh: DeviceMesh) -> None:
    # A pending sum whose gradient is declared Partial() is summed over tp again: tp times too large.
    with pytest.raises(ValueError, match=r"tp is Partial\(sum\) with gradient placement Partial\(sum\).*Replicate\(\) on tp"):
        spmd.spmd_type_of([Shard(0), Partial()], fake_mesh, grad_placements=[Shard(0), Partial()])
    with pytest.raises(ValueError, match=r"dp is Shard\(dim=0\) with gradient placement Replicate\(\)"):
        spmd.spmd_type_of([Shard(0), Partial()], fake_mesh, grad_placements=[Replicate(), Replicate()])
    assert str(spmd.spmd_type_of([Shard(0), Partial()], fake_mesh, grad_placements=[Shard(0), Replicate()])) == "S(0)@dp, P@tp"
    assert str(spmd.spmd_type_of([Shard(0), Partial("max")], fake_mesh, grad_placements=[Shard(0), Partial()])) == "S(0)@dp, Pmax@tp"


@pytest.mark.parametrize("op", ["product", "band", "bor", "bxor"])
def test_reductions_that_are_not_types(fake_mesh: DeviceMesh, op: str) -> None:
    with pytest.raises(ValueError, match=rf"Partial\('{op}'\) on mesh dim tp has no SPMD type.*partitioned into it exactly"):
        spmd.spmd_type_of([Shard(0), Partial(op)], fake_mesh)


def test_internal_partials_are_not_types(fake_mesh: DeviceMesh) -> None:
    with pytest.raises(ValueError, match="_MaskPartial on mesh dim dp has no SPMD type"):
        spmd.spmd_type_of([_MaskPartial(), Shard(0)], fake_mesh)


def test_undecodable_strided_shard(fake_mesh: DeviceMesh) -> None:
    with pytest.raises(ValueError, match="split factor 3"):
        spmd.spmd_type_of([_StridedShard(0, split_factor=3), Shard(0)], fake_mesh)
    with pytest.raises(ValueError, match="split factor 2"):
        spmd.spmd_type_of([_StridedShard(0, split_factor=2), Replicate()], fake_mesh, replicate=I)


def test_types_without_placements(fake_mesh: DeviceMesh) -> None:
    with pytest.raises(ValueError, match=r"V@tp has no DTensor placement.*S\(d\)@tp"):
        spmd.placements_of((R @ dp, V @ tp), fake_mesh)
    with pytest.raises(ValueError, match=r"no order for dp, tp.*S\(0\)@\(dp, tp\)"):
        spmd.placements_of((S(0) @ dp, S(0) @ tp), fake_mesh)
    with pytest.raises(ValueError, match="says nothing about mesh dim.*tp"):
        spmd.placements_of((R @ dp,), fake_mesh)
    with pytest.raises(ValueError, match="names cp, which the mesh"):
        spmd.placements_of(TensorType.parse("R@dp,R@tp,R@cp"), fake_mesh)


def test_to_local_checks_the_types_against_the_placements(sim: SimWorld, fake_mesh: DeviceMesh) -> None:
    dt = DTensor.from_local(sim.make({r: torch.ones(2, 2) for r in range(4)}), fake_mesh, [Shard(0), Replicate()])
    with pytest.raises(ValueError, match=r"to_local: the types S\(1\)@dp, R@tp are the placements.*\(R or I\)@tp"):
        spmd.to_local(dt, S(1) @ dp, R @ tp)
    with pytest.raises(ValueError, match="Partial"):
        spmd.to_local(dt, S(0) @ dp, P @ tp)
    with pytest.raises(TypeError, match="takes a DTensor"):
        spmd.to_local(torch.ones(2), R @ dp, R @ tp)  # type: ignore[arg-type]
    local = spmd.to_local(dt, S(0) @ dp, I @ tp)
    assert local.shape == (2, 2)


def test_from_local_errors(sim: SimWorld, fake_mesh: DeviceMesh) -> None:
    x = sim.make({r: torch.ones(2, 2) for r in range(4)})
    with pytest.raises(ValueError, match=r"from_local: the types S\(0\)@dp, R@tp are the placements"):
        spmd.from_local(x, fake_mesh, S(0) @ dp, R @ tp, placements=[Shard(1), Replicate()])
    with pytest.raises(ValueError, match="several mesh dims, one of them not a sum"):
        spmd.from_local(x, fake_mesh, P @ dp, Pmax @ tp)
    # The types and placements agree: fine.
    dt = spmd.from_local(x, fake_mesh, S(0) @ dp, R @ tp, placements=[Shard(0), Replicate()])
    assert dt.shape == (4, 2)


def test_uneven_strided_shards_are_refused(sim: SimWorld, fake_mesh: DeviceMesh) -> None:
    x = sim.make({r: torch.ones(3, 2) for r in range(4)})
    with pytest.raises(ValueError, match="does not split evenly"):
        spmd.from_local(x, fake_mesh, S(0) @ (tp, dp), shape=torch.Size([11, 2]), stride=(2, 1))


def test_a_shard_order_kept_in_the_spec_is_read(sim: SimWorld, fake_mesh: DeviceMesh) -> None:
    """A spec may hold the order as shard_order next to plain Shard placements: same type as _StridedShard."""
    from torch.distributed.tensor._dtensor_spec import ShardOrderEntry, TensorMeta

    local = sim.make({r: torch.ones(2, 3) for r in range(4)})
    meta = TensorMeta(torch.Size([8, 3]), (3, 1), torch.float32)
    spec = DTensorSpec(
        fake_mesh, (Shard(0), Shard(0)), tensor_meta=meta, shard_order=(ShardOrderEntry(0, (1, 0)),)
    )
    dt = DTensor(local, spec, requires_grad=False)
    assert spmd.to_local(dt, S(0) @ (tp, dp)).shape == (2, 3)
    with pytest.raises(ValueError, match=r"_StridedShard"):
        spmd.to_local(dt, S(0) @ (dp, tp))


def test_dtensor_alone_gives_every_non_sum_part_the_whole_gradient(sim: SimWorld, fake_mesh: DeviceMesh) -> None:
    """What docs/dtensor.md says DTensor does, and what spmd.from_local does instead."""
    parts = {r: torch.tensor([float(r % 2), 5.0 - r % 2]) for r in range(4)}
    weight = torch.tensor([1.0, 10.0])
    for op, pending, ours in [("max", Pmax, {0: [0.0, 10.0], 1: [1.0, 0.0]}), ("avg", Pavg, {0: [0.5, 5.0], 1: [0.5, 5.0]})]:
        for typed in (False, True):
            x = sim.make(parts).requires_grad_()
            if typed:
                dt = spmd.from_local(x, fake_mesh, I @ dp, pending @ tp)
            else:
                dt = DTensor.from_local(x, fake_mesh, [Replicate(), Partial(op)])
            y = dt.redistribute(fake_mesh, [Replicate(), Replicate()]).to_local(grad_placements=[Replicate(), Replicate()])
            (y * weight).sum().backward()
            grads = sim.parts(x.grad)
            for rank in range(4):
                want = torch.tensor(ours[rank % 2]) if typed else weight
                torch.testing.assert_close(grads[rank], want, msg=lambda m: f"{op} typed={typed} rank {rank}: {m}")
