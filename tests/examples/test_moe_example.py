"""The typed mixture-of-experts example: it type-checks clean and trains like the unparallelised block.

One spawned 2 ep x 2 tp gloo world trains the block for two steps; every
loss and every parameter gradient must equal the single-process reference.
``train_moe.py`` itself is also run as a user would.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from spmd_examples import GPT, MOE, ROOT, MypyRun

sys.path.insert(0, str(GPT))  # the gloo launcher, shared with the GPT example
sys.path.insert(0, str(MOE))
import gloo_launch
import train_moe
from ep_moe import Config

STEPS = 2
MOE_FILES = ("examples/moe/ep_moe.py", "examples/moe/moe_reference.py", "examples/moe/train_moe.py")


def test_moe_example_type_checks_clean(example_mypy_run: MypyRun) -> None:
    for path in MOE_FILES:
        assert example_mypy_run.clean(path), example_mypy_run.output


@pytest.fixture(scope="module")
def reports() -> list[list[train_moe.StepReport]]:
    return gloo_launch.spawn(train_moe.train, Config(), STEPS, world_size=4)


def test_losses_and_gradients_match_reference(reports: list[list[train_moe.StepReport]]) -> None:
    for rank, rank_reports in enumerate(reports):
        assert [r.step for r in rank_reports] == list(range(STEPS))
        for report in rank_reports:
            assert report.ok, f"rank {rank}: {report.line()}"
            assert report.grad_error < 1e-12 and report.loss == pytest.approx(report.reference, rel=1e-12)


def test_training_changes_the_loss(reports: list[list[train_moe.StepReport]]) -> None:
    """The steps are real updates on new batches: the loss moves."""
    losses = [r.loss for r in reports[0]]
    assert losses[0] != pytest.approx(losses[1], rel=1e-6)


def test_train_script_exits_zero_and_prints_losses() -> None:
    run = subprocess.run(
        [sys.executable, str(MOE / "train_moe.py"), "--steps", "1"], cwd=ROOT, capture_output=True, text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [line for line in run.stdout.splitlines() if line.startswith("step ")]
    assert len(lines) == 1 and lines[0].endswith(" ok"), run.stdout
