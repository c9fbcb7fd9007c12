"""The simulated world: 4 ranks in one process, a 2 dp x 2 tp mesh bound."""

from __future__ import annotations

from typing import Iterator

import pytest
import torch.distributed as dist
from spmd_world import MESH_DIMS, MESH_SHAPE, WORLD_SIZE, SimWorld
from torch.distributed._local_tensor import LocalTensorMode
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.testing._internal.distributed.fake_pg import FakeStore  # registers "fake"

import spmd_stubs as spmd


@pytest.fixture(scope="session")
def fake_mesh() -> Iterator[DeviceMesh]:
    """The fake process group (rank 0's view of a 4-rank world) and its mesh."""
    dist.init_process_group("fake", rank=0, world_size=WORLD_SIZE, store=FakeStore())
    with LocalTensorMode(WORLD_SIZE):
        mesh = init_device_mesh("cpu", MESH_SHAPE, mesh_dim_names=MESH_DIMS)
    yield mesh
    dist.destroy_process_group()


@pytest.fixture
def sim(fake_mesh: DeviceMesh) -> Iterator[SimWorld]:
    """LocalTensorMode active, the mesh bound; unbound afterwards."""
    with LocalTensorMode(WORLD_SIZE) as mode:
        spmd.bind_mesh(fake_mesh)
        try:
            yield SimWorld(mode)
        finally:
            spmd.unbind()
