"""Soundness: every program the checker accepts computes the right gradients.

Random typed programs (``spmd_programs``) are checked by ONE mypy run per
batch; each accepted one is run through the runtime shim in the simulated
4-rank world and its per-rank input gradients are compared with plain
autograd over the program's global meaning (``spmd_reference``). A failing
batch shrinks to a minimal program.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spmd_programs import AXES, Comm, Local, Program, Value, programs
from spmd_reference import random_inputs
from spmd_soundness import Report, judge, process_batch, run_program, simulated_world, write_batch

from spmd_stubs import core
from spmd_stubs.core import AxisType

BATCH = 40


@pytest.fixture(scope="module")
def mesh() -> Iterator[object]:
    with simulated_world() as m:
        yield m


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("soundness")


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch=st.lists(programs(), min_size=BATCH, max_size=BATCH))
def test_accepted_programs_compute_correct_gradients(batch: list[Program], mesh: object, workdir: Path) -> None:
    report = Report()
    process_batch(batch, workdir / "batch", workdir / "cache", mesh, seed=0, report=report)
    assert not report.mypy_crashes, report.mypy_crashes[0]
    assert not report.accepted_runtime_errors, report.accepted_runtime_errors[0]
    assert not report.mismatches, report.mismatches[0]


# --------------------------------------------------------------------------
# The oracle has teeth: fixed programs, run without the checker
# --------------------------------------------------------------------------

R, I, P = core.Replicate, core.Invariant, core.Partial  # noqa: E741 -- the spec's names


def _judge_unchecked(program: Program, mesh: object, tmp_path: Path) -> list[str]:
    """Run ``program`` through the shim (no checker) and judge its gradients."""
    [path] = write_batch([program], tmp_path)
    inputs = random_inputs(program, torch.Generator().manual_seed(1))
    outcome = run_program(mesh, path, program, inputs)
    assert outcome.error is None, outcome.error
    return judge(program, outcome, inputs)


def _product(second: AxisType, dst: AxisType) -> Program:
    """x0 (P@tp) * x1 (``second``@tp), summed, then all_reduce(P, dst) on tp; I on dp."""
    x, y = Value("x0", (2, 2), (I, P)), Value("x1", (2, 2), (I, second))
    prod, total, loss = Value("t0", (2, 2), (I, P)), Value("t1", (), (I, P)), Value("t2", (), (I, dst))
    body = (
        Local(prod, "x0 * x1", ("x0", "x1")),
        Local(total, "t0.sum()", ("t0",)),
        Comm(loss, "all_reduce", "t1", AXES[1], P, dst, expert=False),
    )
    return Program((x, y), body, loss, frozenset())


def test_partial_times_replicate_is_right(mesh: object, tmp_path: Path) -> None:
    """Well typed (one P factor, an I loss): no mismatch."""
    assert _judge_unchecked(_product(R, I), mesh, tmp_path) == []


def test_partial_times_partial_is_caught_by_the_reference(mesh: object, tmp_path: Path) -> None:
    """P * P: the local products sum to a1 b1 + a2 b2, not (a1 + a2)(b1 + b2)."""
    assert _judge_unchecked(_product(P, I), mesh, tmp_path)


def test_a_replicate_loss_is_caught_by_the_reference(mesh: object, tmp_path: Path) -> None:
    """An R loss: backward seeds 1.0 on both tp ranks, so the gradients are doubled."""
    assert _judge_unchecked(_product(R, R), mesh, tmp_path)
