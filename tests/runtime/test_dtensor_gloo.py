"""DTensor interop on 4 real gloo processes: ``init_device_mesh("cpu", (2, 2), ("dp", "tp"))``.

The checks of ``dtensor_checks`` (layouts, to_local/from_local gradients,
a pending max through DTensor and the typed collectives) in one world; each
is reported as its own test.
"""

from __future__ import annotations

from typing import Callable

from dtensor_checks import CHECKS as WORLD_CHECKS
from spmd_world import Check, GlooWorld, gloo_tests
from torch.distributed.device_mesh import DeviceMesh

import spmd_stubs as spmd


def _bound(fn: Callable[..., None]) -> Check:
    def run(mesh: DeviceMesh) -> None:
        spmd.bind_mesh(mesh)
        try:
            fn(GlooWorld(), mesh)
        finally:
            spmd.unbind()

    return run


CHECKS = {name: _bound(fn) for name, fn in WORLD_CHECKS.items()}


gloo_world, test_gloo = gloo_tests(__name__, CHECKS)
