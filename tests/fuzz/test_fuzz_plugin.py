"""The plugin never crashes mypy on random hostile modules.

Each hypothesis example is one fuzz round: a batch of generated modules
(``fuzz_sources``) checked by one mypy run with the plugin. Any error
report is fine; a traceback, an INTERNAL ERROR or an exit status other than
0/1 is not. ``scripts/fuzz_plugin.py`` runs many more rounds.  Real untyped
code bases are checked by ``tests/third_party/test_differential.py``, which
also requires mypy's report to be the same as without the plugin.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzz_sources import modules
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mypy_batch import MypyRun, run_mypy, write_config

ROUND = 20


def fuzz_round(sources: list[str], directory: Path, cache: Path) -> MypyRun:
    """Write the modules and check them all with one mypy run."""
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("fuzz_*.py"):
        stale.unlink()
    paths = []
    for index, source in enumerate(sources):
        path = directory / f"fuzz_{index:04d}.py"
        path.write_text(source)
        paths.append(path)
    return run_mypy(paths, write_config(directory), cache)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(sources=st.lists(modules(), min_size=ROUND, max_size=ROUND))
def test_plugin_never_crashes_on_hostile_modules(sources: list[str], workdir: Path) -> None:
    run = fuzz_round(sources, workdir / "round", workdir / "cache")
    assert not run.crashed, run.output[-6000:]


def test_plugin_reports_errors_in_fuzzed_code(workdir: Path) -> None:
    """The fuzz round is not vacuous: malformed annotations get spmd-annotation errors."""
    source = "from spmd_stubs import R, Tensor\nfrom spmd_stubs.axes import tp\n\n\ndef f(x: Tensor[Q@tp, R@foo]) -> None:\n    pass\n"
    run = fuzz_round([source], workdir / "nonvacuous", workdir / "cache")
    [errors] = run.files.values()
    assert not run.crashed and "spmd-annotation" in errors.codes, run.output
