"""spmd-coverage's command line: the summary, the JSON file, and a clear exit 2 where mypy stops."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Callable

import pytest

from tests.plugin.harness import ROOT, config_text

FIXTURE = Path(__file__).resolve().parent / "fixture"

SUMMARY = """\
SPMD coverage: 81.8% of tensor-valued expressions have a known SPMD type (27 of 33) in 2 modules
Lowest modules (1 not fully known):
   71.4%  15 of 21  leaky (tests/coverage/fixture/leaky.py)
Lowest functions (3 not fully known):
    0.0%  0 of 2  leaky: plain
   71.4%  5 of 7  leaky: calls_plain
Places where typed values become unknown (4, most typed flow cut first):
  tests/coverage/fixture/leaky.py:18:9: unannotated parameter, cuts 4: `helper` takes Tensor[R@tp] as `t`, \
lost at an unannotated parameter
  tests/coverage/fixture/leaky.py:24:9: parameter typed plain torch.Tensor, cuts 2: `plain` takes Tensor[R@tp] \
as `t`, lost at a parameter typed plain torch.Tensor
"""


def _run(arguments: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    with open(cache / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return subprocess.run([sys.executable, "-m", "spmd_mypy.coverage", "--cache-dir", str(cache / "mypy_cache"),
                               *arguments], cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def cache(kept_dir: Callable[[str], Path]) -> Path:
    return kept_dir("spmd_coverage")


def test_summary_and_json(cache: Path, tmp_path: Path) -> None:
    config = tmp_path / "mypy.ini"
    config.write_text(config_text())
    report = tmp_path / "coverage.json"
    done = _run(["--config-file", str(config), "--json", str(report), "--top", "2",
                 str(FIXTURE.relative_to(ROOT))], cache)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == SUMMARY
    data = json.loads(report.read_text())
    assert data["overall"] == {"expressions": 33, "known": 27, "share": 0.8182}
    assert [m["path"] for m in data["modules"]] == ["tests/coverage/fixture/leaky.py",
                                                   "tests/coverage/fixture/typed_block.py"]
    assert sum(len(m["functions"]) for m in data["modules"]) == 9
    assert [(p["line"], p["column"], p["kind"], p["cut"]) for p in data["places"]] == [
        (18, 9, "unannotated parameter", 4), (24, 9, "parameter typed plain torch.Tensor", 2),
        (30, 9, "unmodelled op", 2), (26, 12, "return typed plain torch.Tensor", 0),
    ]


def test_the_documented_summary_is_the_commands() -> None:
    assert f"--top 2 tests/coverage/fixture\n{SUMMARY}```" in (ROOT / "docs" / "checker.md").read_text()


def test_a_bad_config_exits_2_with_its_message(cache: Path, tmp_path: Path) -> None:
    config = tmp_path / "mypy.ini"
    config.write_text(config_text("[spmd_mypy]\nstrict = perhaps\n"))
    done = _run(["--config-file", str(config), str(FIXTURE.relative_to(ROOT))], cache)
    assert done.returncode == 2
    assert "strict" in done.stderr and "perhaps" in done.stderr and "spmd-coverage: error: mypy stopped" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout and "SPMD coverage" not in done.stdout


def test_a_missing_path_exits_2(cache: Path, tmp_path: Path) -> None:
    done = _run([str(tmp_path / "nowhere.py")], cache)
    assert done.returncode == 2
    assert done.stderr == f"spmd-coverage: error: no such file or directory: {tmp_path / 'nowhere.py'}\n"
    assert done.stdout == ""


def test_the_command_is_installed_by_name() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["spmd-coverage"] == "spmd_mypy.commands:coverage"
