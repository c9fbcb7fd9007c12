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
from spmd_programs import AXES, Comm, Local, Program, Selector, Value, programs
from spmd_reference import random_inputs
from spmd_soundness import Report, check_batch, judge, process_batch, run_program, simulated_world, write_batch

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
@given(batch=st.lists(programs(helpers=True), min_size=BATCH, max_size=BATCH))
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


# --------------------------------------------------------------------------
# SELECT with an untyped selector: the data decides (docs/spec.md#select)
# --------------------------------------------------------------------------


def _select_loss(logits: AxisType) -> Program:
    """``F.cross_entropy(x0, s0)``: logits ``logits``@tp (I on dp), labels a plain torch.Tensor, the same on
    every rank; the loss is backpropagated as it is."""
    x, labels = Value("x0", (2, 4), (I, logits)), Selector("s0", (2,), 4, (False, False))
    loss = Value("t0", (), (I, logits))
    return Program((x,), (Local(loss, "F.cross_entropy(x0, s0)", ("x0", "s0")),), loss, frozenset(), (labels,))


def test_a_select_with_an_untyped_selector_is_judged_by_its_data(mesh: object, workdir: Path, tmp_path: Path) -> None:
    """Logits R on tp give an R loss, its gradient counted tp times: the checker reports it (it once let
    the unknown labels make the loss unknown), the reference sees it; with I logits both accept."""
    wrong, right = _select_loss(R), _select_loss(I)
    run = check_batch([wrong, right], workdir / "select", workdir / "cache")
    assert not run.crashed, run.output
    [wrong_verdict, right_verdict] = run.files.values()
    assert wrong_verdict.codes == {core.Code.BACKWARD.value}, wrong_verdict.errors
    assert right_verdict.accepted, right_verdict.errors
    assert _judge_unchecked(wrong, mesh, tmp_path / "wrong")
    assert _judge_unchecked(right, mesh, tmp_path / "right") == []
