"""The typed GPT example: it type-checks clean in both configurations and trains like the unparallelised model.

One spawned 2 dp x 2 tp gloo world trains both sequence-parallel modes for
two steps; every loss and every parameter gradient must equal the
single-process reference.  ``train.py`` itself is also run as a user would.
"""

from __future__ import annotations

import configparser
import subprocess
import sys

import pytest
from spmd_examples import GPT, MYPY_CONFIG, ROOT, MypyRun

from spmd_mypy.configurations import declared

sys.path.insert(0, str(GPT))
import gloo_launch
import train

STEPS = 2
RECOMMENDED = ROOT / "spmd_mypy" / "recommended.ini"


def test_gpt_example_type_checks_clean(example_mypy_run: MypyRun) -> None:
    gpt_errors = {path: errs for path, errs in example_mypy_run.errors.items() if path.startswith("examples/gpt/")}
    assert gpt_errors == {}, example_mypy_run.output


def test_mlp_example_type_checks_clean(example_mypy_run: MypyRun) -> None:
    assert example_mypy_run.clean("examples/train_mlp.py"), example_mypy_run.output


@pytest.fixture(scope="module")
def reports() -> list[list[train.StepReport]]:
    return gloo_launch.spawn(train.train_configs, [False, True], STEPS, world_size=4)


@pytest.mark.parametrize("sequence_parallel", [False, True], ids=["sp_off", "sp_on"])
def test_losses_and_gradients_match_reference(reports: list[list[train.StepReport]], sequence_parallel: bool) -> None:
    for rank, rank_reports in enumerate(reports):
        mine = [r for r in rank_reports if r.sequence_parallel == sequence_parallel]
        assert [r.step for r in mine] == list(range(STEPS))
        for report in mine:
            assert report.ok, f"rank {rank}: {report.line()}"
            assert report.grad_error < 1e-12 and report.loss == pytest.approx(report.reference, rel=1e-12)


def test_training_changes_the_loss(reports: list[list[train.StepReport]]) -> None:
    """The steps are real updates: the loss moves, identically in both modes."""
    losses = {sp: [r.loss for r in reports[0] if r.sequence_parallel == sp] for sp in (False, True)}
    assert losses[False][0] != pytest.approx(losses[False][1], rel=1e-6)
    assert losses[False] == pytest.approx(losses[True], rel=1e-12)


def test_train_script_exits_zero_and_prints_losses() -> None:
    run = subprocess.run(
        [sys.executable, str(GPT / "train.py"), "--steps", "1"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [line for line in run.stdout.splitlines() if " step " in line]
    assert len(lines) == 2 and all(line.endswith(" ok") for line in lines), run.stdout


def test_the_examples_config_is_the_recommended_one_plus_the_sequence_parallel_configurations() -> None:
    """examples/mypy.ini repeats no setting of its own besides the configurations the GPT is checked in."""
    recommended, examples = configparser.ConfigParser(), configparser.ConfigParser()
    recommended.read(RECOMMENDED)
    examples.read(MYPY_CONFIG)
    assert {s: dict(examples[s]) for s in examples.sections() if s != "spmd_mypy"} == {
        s: dict(recommended[s]) for s in recommended.sections()
    }
    configurations = declared.parse(examples["spmd_mypy"]["configurations"])
    assert [(c.name, c.flags) for c in configurations] == [
        ("sp", (("sequence_parallel", True),)), ("no_sp", (("sequence_parallel", False),))
    ]
