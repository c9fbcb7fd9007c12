"""Typed collectives with ``async_op=True`` in the simulated world: complete at once, equal to the sync call.

torch has no real async in one process, so the Pending is done when
returned; its ``wait()`` still gives exactly what the synchronous call
gives, and :func:`spmd_cases.check` holds it to the one-process reference.
"""

from __future__ import annotations

import pytest
import torch
from spmd_cases import Case, check
from spmd_world import GROUPS, SimWorld
from test_async_p2p_gloo import CASES, async_call

import spmd_stubs as spmd
from spmd_stubs import R, S
from spmd_stubs.axes import dp, tp
from spmd_stubs.core import Kind

SOME = [next(case for case in CASES if case.op == op and predicate(case)) for op, predicate in (
    ("all_reduce", lambda case: case.avg),
    ("all_gather", lambda case: case.uneven),
    ("reduce_scatter", lambda case: case.src.kind is Kind.P and case.dst.shard == 1),
    ("all_to_all", lambda case: case.src.shard is None),
)]
"""One case of each collective (the simulated world's async is the sync call's code; the gloo test runs all)."""


@pytest.mark.parametrize("case", SOME, ids=lambda c: c.id)
def test_on_tp(sim: SimWorld, case: Case) -> None:
    check(sim, case, tp, GROUPS["tp"], fn=async_call(case, tp, 2))


@pytest.mark.parametrize("case", SOME, ids=lambda c: c.id)
def test_on_flattened_dp_tp(sim: SimWorld, case: Case) -> None:
    check(sim, case, (dp, tp), GROUPS["dp_tp"], fn=async_call(case, (dp, tp), 4))


def test_the_pending_is_done_when_returned(sim: SimWorld) -> None:
    x = sim.make({rank: torch.full((2, 3), float(rank)) for rank in range(4)})
    pending = spmd.all_gather(x, tp, src=S(0), dst=R, async_op=True)
    assert pending.is_completed()
    assert sim.parts(pending.wait())[1][2:].eq(1.0).all()
