"""A peer rank that dies or stops answering, on 2 real gloo processes: the survivor's error says so.

gloo reports a peer process that exited or was killed as a connection
closed or reset, and a peer that does not answer as a timeout (then, on
every later call, the group's closure).  A typed collective turns these
into a ``RuntimeError`` naming the call and the axis and saying what to
do, not into the error about ranks passing tensors of different shapes.
Each world is 2 processes: rank 1 dies (or hangs) after a barrier, rank 0
makes typed calls on the now broken group and writes what each raised.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Callable

import pytest
import torch
import torch.distributed as dist
from spmd_world import spawn_ranks

import spmd_stubs as spmd
from spmd_stubs import P, R, S
from spmd_stubs.axes import tp

_TIMEOUT_S = 2
"""The process group's timeout: how long the survivor waits for a peer that hangs."""

_CALLS: dict[str, Callable[[], torch.Tensor]] = {
    "all_reduce(x, tp, src=P, dst=R)": lambda: spmd.all_reduce(torch.ones(4), tp, src=P, dst=R),
    "all_gather(x, tp, src=S(0), dst=R)": lambda: spmd.all_gather(torch.ones(4), tp, src=S(0), dst=R),
}
"""Each call's text, as its error names it -> the call."""


def _rank_main(rank: int, port: int, out: str, fate: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2, timeout=timedelta(seconds=_TIMEOUT_S))
    spmd.bind_groups({tp: dist.group.WORLD})
    dist.barrier()
    done = Path(out) / "survivor.json"
    if rank == 1:
        if fate == "killed":
            os.kill(os.getpid(), signal.SIGKILL)
        while not done.exists():  # hangs: answers nothing until the survivor is done
            time.sleep(0.1)
        os._exit(0)
    errors = {}
    for validate in (False, True):  # the fast path, then validation mode's exchange
        spmd.set_validation(validate)
        for text, call in _CALLS.items():
            try:
                call()
                errors[f"{text} {validate}"] = "no error"
            except Exception as error:  # noqa: BLE001 -- reported to the test, which judges it
                errors[f"{text} {validate}"] = f"{type(error).__name__}: {error}"
    done.write_text(json.dumps(errors))
    os._exit(0)  # without its peer the group cannot be destroyed cleanly


def _survivor_errors(fate: str) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as out:
        spawn_ranks(_rank_main, 2, (out, fate), timeout=120)
        path = Path(out) / "survivor.json"
        assert path.exists(), "rank 0 never finished its calls"
        return json.loads(path.read_text())


@pytest.mark.parametrize(
    "fate, says",
    [
        ("killed", "a peer rank of axis tp's group exited or was killed"),
        ("hangs", "a peer rank of axis tp's group did not answer within the process group's timeout"),
    ],
)
def test_the_survivor_is_told_its_peer_is_gone(fate: str, says: str) -> None:
    for key, error in _survivor_errors(fate).items():
        call = key.rsplit(" ", 1)[0]
        assert error.startswith(f"RuntimeError: {call}: {says}"), (key, error)
        assert "Fix: " in error and "different shapes" not in error, (key, error)
