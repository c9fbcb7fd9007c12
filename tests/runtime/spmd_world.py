"""Two worlds to run typed collectives in: simulated and real.

* :class:`SimWorld`: one process, ``LocalTensorMode`` over the ``fake``
  backend; a tensor holds every rank's shard.
* :func:`run_world`: ``world_size`` real gloo processes (2 dp x 2 tp mesh)
  that each run every check of a module's ``CHECKS`` and write what failed;
  one world serves a whole test module (:func:`gloo_tests` makes its tests).
  :func:`spawn_ranks` starts the processes, for worlds of other sizes too.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import tempfile
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Mapping

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from spmd_cases import Parts
from torch.distributed._local_tensor import LocalTensorMode
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

WORLD_SIZE = 4
MESH_SHAPE = (2, 2)
MESH_DIMS = ("dp", "tp")
# Row-major 2 x 2 mesh: the groups of each axis, independent of the shim.
GROUPS = {"tp": [[0, 1], [2, 3]], "dp": [[0, 2], [1, 3]], "dp_tp": [[0, 1, 2, 3]], "tp_dp": [[0, 2, 1, 3]]}

Check = Callable[[DeviceMesh], None]


class SimWorld:
    """Per-rank tensors as LocalTensors of the active LocalTensorMode."""

    def __init__(self, mode: LocalTensorMode) -> None:
        self.mode = mode

    def make(self, parts: Parts) -> torch.Tensor:
        return self.mode.rank_map(lambda r: parts[r].clone())

    def parts(self, t: torch.Tensor) -> Parts:
        return {r: local.detach() for r, local in t._local_tensors.items()}  # type: ignore[attr-defined]


class GlooWorld:
    """This process's tensor is its rank's part; parts are gathered from all ranks."""

    def make(self, parts: Parts) -> torch.Tensor:
        return parts[dist.get_rank()].clone()

    def parts(self, t: torch.Tensor) -> Parts:
        gathered: list[object] = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, t.detach())
        return dict(enumerate(gathered))  # type: ignore[arg-type]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_world(module: str, timeout: float = 240.0) -> dict[str, str]:
    """Run every check of ``module.CHECKS`` on ``WORLD_SIZE`` gloo ranks.

    Returns check name -> failure text ("" when it passed on every rank).
    """
    names = list(importlib.import_module(module).CHECKS)
    with tempfile.TemporaryDirectory() as out:
        codes = spawn_ranks(_rank_main, WORLD_SIZE, (module, out), timeout)
        per_rank = [_read(Path(out) / f"rank{r}.json") for r in range(WORLD_SIZE)]
    return {name: _merge(name, per_rank, codes) for name in names}


def spawn_ranks(main: Callable[..., None], world_size: int, args: tuple[Any, ...], timeout: float) -> list[object]:
    """Run ``main(rank, port, *args)`` in ``world_size`` fresh processes; their exit codes.

    ``port`` is a free port for the rendezvous.  A process still running
    after ``timeout`` seconds is killed.
    """
    port = _free_port()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=main, args=(rank, port, *args)) for rank in range(world_size)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout)
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    return [p.exitcode for p in procs]


def by_name(*checks: Check) -> dict[str, Check]:
    """``CHECKS`` of a gloo test module: each check under its function's name."""
    return {check.__name__: check for check in checks}


def gloo_tests(module: str, checks: Mapping[str, Check]) -> tuple[Any, Any]:
    """One gloo world per test module and one test per check.

    ``gloo_world, test_gloo = gloo_tests(__name__, CHECKS)`` at module level:
    pytest collects the fixture and the parametrised test from those names.
    """

    @pytest.fixture(scope="module")
    def gloo_world() -> dict[str, str]:
        return run_world(module)

    @pytest.mark.parametrize("name", list(checks))
    def test_gloo(gloo_world: dict[str, str], name: str) -> None:
        assert gloo_world[name] == "", gloo_world[name]

    return gloo_world, test_gloo


def _read(path: Path) -> dict[str, str]:
    return json.loads(path.read_text()) if path.exists() else {}


def _merge(name: str, per_rank: list[dict[str, str]], codes: list[object]) -> str:
    problems = []
    for rank, results in enumerate(per_rank):
        if name not in results:
            problems.append(f"rank {rank} never finished it (exit code {codes[rank]})")
        elif results[name]:
            problems.append(f"rank {rank}: {results[name]}")
    return "\n".join(problems)


def _rank_main(rank: int, port: int, module: str, out: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE, timeout=timedelta(seconds=60))
    mesh = init_device_mesh("cpu", MESH_SHAPE, mesh_dim_names=MESH_DIMS)
    results: dict[str, str] = {}
    for name, check in importlib.import_module(module).CHECKS.items():
        try:
            check(mesh)
            results[name] = ""
        except Exception:  # noqa: BLE001 -- reported to the test, which fails on it
            results[name] = traceback.format_exc()
        # Written after every check, so a hang later still reports these.
        (Path(out) / f"rank{rank}.json").write_text(json.dumps(results))
    dist.destroy_process_group()
