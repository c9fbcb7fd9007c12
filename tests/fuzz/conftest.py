"""Fuzz tests reuse the soundness harness (mypy batches) and the runtime tests' simulated world."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

TESTS = Path(__file__).resolve().parents[1]
for helper_dir in (TESTS / "property", TESTS / "runtime"):
    if str(helper_dir) not in sys.path:
        sys.path.insert(0, str(helper_dir))

from spmd_soundness import simulated_world  # noqa: E402
from spmd_world import WORLD_SIZE, SimWorld  # noqa: E402

import spmd_stubs as spmd  # noqa: E402


@pytest.fixture(scope="module")
def sim_mesh() -> Iterator[object]:
    with simulated_world() as mesh:
        yield mesh


@pytest.fixture
def sim(sim_mesh: object) -> Iterator[SimWorld]:
    """LocalTensorMode active with the 2 dp x 2 tp mesh bound (unbound afterwards)."""
    from torch.distributed._local_tensor import LocalTensorMode

    with LocalTensorMode(WORLD_SIZE) as mode:
        spmd.bind_mesh(sim_mesh)  # type: ignore[arg-type]
        try:
            yield SimWorld(mode)
        finally:
            spmd.unbind()
