"""``spmd-check`` on a real project: every configuration checked, caches per configuration, exit statuses,
mypy's output settings kept.

The project declares its configurations in pyproject.toml (``[tool.spmd_mypy.configurations]``);
mypy runs for real, once per configuration.
"""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.plugin.harness import ROOT, config_text

PYPROJECT = f"""\
[tool.mypy]
plugins = ["spmd_mypy"]
mypy_path = "{ROOT}"

[[tool.mypy.overrides]]
module = ["torch._inductor.*", "torch._dynamo.*", "torch.fx.*", "torch.onnx.*", "torch.export.*"]
follow_imports = "skip"

[tool.spmd_mypy.configurations]
sp = {{ sequence_parallel = true }}
no_sp = {{ sequence_parallel = false }}
"""

MODEL = """\
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import I, R, S, Tensor
from spmd_stubs.axes import tp

Activation = Tensor[S[0, tp]] if spmd.flags.sequence_parallel else Tensor[I[tp]]


class Norm:
    weight: Tensor[I@tp]
    sequence_parallel: bool

    def forward(self, x: Activation) -> Activation:
        return F.layer_norm(x, x.shape[-1:], self.weight)

    def entered(self, x: Activation) -> Tensor[R@tp]:
        if self.sequence_parallel:
            return spmd.all_gather(x, tp, src=S(0), dst=R)
        return spmd.convert(x, tp, src=I, dst=R)
"""


OTHER = """\
import spmd_stubs as spmd


class Cast:
    def widened(self, x: list[int]) -> list[float]:
        return x


def chosen() -> int:
    if spmd.flags.sequence_parallel:
        return "sp"
    return 1
"""
"""Plain mypy errors: one with notes in every configuration, one in sp only, in a class and a function."""

SPMD_CHECK = [sys.executable, "-m", "spmd_mypy.configurations.cli"]
COLOURED = {**os.environ, "MYPY_FORCE_COLOR": "1", "TERM": "xterm-256color", "COLUMNS": "100"}
"""mypy's colours without a terminal (its own override), and one width for --pretty's wrapping."""


def spmd_check(project: Path, *arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SPMD_CHECK, *arguments], cwd=project, capture_output=True, text=True, timeout=600, env=env)


def mypy_in_sp(project: Path, *arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Plain mypy in the sp configuration, with spmd-check's cache of it."""
    command = [sys.executable, "-m", "mypy", "--cache-dir", ".mypy_cache/configurations/sp", *arguments]
    return subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=600,
                          env={**(env or os.environ), "SPMD_MYPY_CONFIGURATION": "sp"})


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("project")
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "model.py").write_text(MODEL)
    (root / "other.py").write_text(OTHER)
    return root


@pytest.fixture(scope="module")
def first_run(project: Path) -> subprocess.CompletedProcess[str]:
    return spmd_check(project, "model.py")


def test_a_bug_of_one_configuration_is_reported_once_labelled(first_run: subprocess.CompletedProcess[str]) -> None:
    errors = [line for line in first_run.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1, first_run.stdout + first_run.stderr
    assert errors[0].startswith("model.py:15: error: [sp] ")
    assert "layer_norm mixes Invariant with Varying on axis tp (V@tp, I@tp)" in errors[0]
    assert errors[0].endswith("[spmd-invariant-mix]")
    assert first_run.stdout.splitlines()[-1] == "Found 1 error in 2 configurations (sp, no_sp)"
    assert first_run.returncode == 1


def test_each_configuration_keeps_its_own_cache(project: Path, first_run: subprocess.CompletedProcess[str]) -> None:
    caches = project / ".mypy_cache" / "configurations"
    assert sorted(p.name for p in caches.iterdir()) == ["no_sp", "sp"]


def test_a_missing_cache_starts_from_another_configurations_and_torch_stays_fresh(
    project: Path, first_run: subprocess.CompletedProcess[str]
) -> None:
    shutil.rmtree(project / ".mypy_cache" / "configurations" / "no_sp")
    run = spmd_check(project, "--configurations", "no_sp", "-v", "model.py")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Metadata fresh for torch._tensor" in run.stderr
    assert "Metadata abandoned for torch" not in run.stderr
    assert "Metadata abandoned for model" in run.stderr  # the copy was sp's: the user's module is checked again


def test_one_configuration_alone(project: Path, first_run: subprocess.CompletedProcess[str]) -> None:
    run = spmd_check(project, "--configurations", "no_sp", "model.py")
    assert run.stdout == "Success: no issues found in 1 configuration (no_sp)\n" and run.returncode == 0
    run = spmd_check(project, "--configurations", "sp", "model.py")
    assert run.stdout.splitlines()[-1] == "Found 1 error in 1 configuration (sp)" and run.returncode == 1


def test_an_unknown_configuration_is_named_with_the_declared_ones(project: Path) -> None:
    run = spmd_check(project, "--configurations", "sq", "model.py")
    assert run.returncode == 2
    assert run.stderr == "spmd-check: --configurations 'sq': no configuration sq; declared: sp, no_sp\n"


def test_a_bad_declaration_is_one_message(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.replace("sequence_parallel = true", "sequence_parallel = 1.5"))
    run = spmd_check(tmp_path, "model.py")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "configuration 'sp': sequence_parallel = 1.5 must be a boolean, an integer, a name" in run.stderr


def test_without_configurations_it_is_one_mypy_run(tmp_path: Path, project: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "mypy.ini").write_text(config_text())
    run = spmd_check(tmp_path, "--cache-dir", str(project / ".mypy_cache"), "model.py")
    # no configuration decides the flag: Activation is the union of both types, and both branches are checked
    assert "all_gather is told src=S(0), but the input is I@tp" in run.stdout, run.stdout
    assert "convert is told src=I, but the input is S(0)@tp" in run.stdout
    assert run.stdout.splitlines()[-1] == "Found 3 errors in 1 file (checked 1 source file)" and run.returncode == 1
    assert not (tmp_path / ".mypy_cache").exists()  # the cache given, as mypy's own


def test_mypys_parallel_workers_are_refused_with_configurations_and_spmd_check_runs_without_them(
    project: Path, first_run: subprocess.CompletedProcess[str]
) -> None:
    plain = subprocess.run([sys.executable, "-m", "mypy", "--num-workers", "2", "model.py"], cwd=project,
                           capture_output=True, text=True, timeout=300)
    assert plain.returncode == 2 and "Traceback" not in plain.stdout + plain.stderr
    assert "[spmd_mypy] configurations need mypy's num_workers = 0" in plain.stdout + plain.stderr
    (project / "pyproject.toml").write_text(PYPROJECT.replace("[tool.mypy]\n", "[tool.mypy]\nnum_workers = 2\n"))
    try:
        run = spmd_check(project, "model.py")
    finally:
        (project / "pyproject.toml").write_text(PYPROJECT)
    assert run.stdout.splitlines()[-1] == "Found 1 error in 2 configurations (sp, no_sp)", run.stdout + run.stderr


def test_a_module_rechecked_because_its_import_changed_keeps_its_flags_decided(
    tmp_path: Path, project: Path, first_run: subprocess.CompletedProcess[str]
) -> None:
    """mypy re-parses a module whose import changed without asking the plugin first: the flags must still
    decide it (the alias, the branches), not leave ``Activation`` an invalid type."""
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "helper.py").write_text("def scale() -> float:\n    return 1.0\n")
    (tmp_path / "model.py").write_text("import helper\n" + MODEL)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    shutil.copytree(project / ".mypy_cache" / "configurations" / "no_sp", tmp_path / "cache")  # torch's entries

    def no_sp() -> str:
        done = subprocess.run([sys.executable, "-m", "mypy", *cache, "model.py"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300, env={**os.environ, "SPMD_MYPY_CONFIGURATION": "no_sp"})
        return done.stdout

    assert no_sp() == "Success: no issues found in 1 source file\n"
    (tmp_path / "helper.py").write_text("def scale() -> int:\n    return 1\n")  # a new interface
    assert no_sp() == "Success: no issues found in 1 source file\n"


def test_json_output_is_mypys_objects_each_with_its_configurations(
    project: Path, first_run: subprocess.CompletedProcess[str]
) -> None:
    run = spmd_check(project, "-O", "json", "model.py", "other.py")
    assert run.returncode == 1, run.stdout + run.stderr
    found = [json.loads(line) for line in run.stdout.splitlines()]
    mypy = [json.loads(line) for line in mypy_in_sp(project, "-O", "json", "model.py", "other.py").stdout.splitlines()]
    everywhere = {("other.py", 6)}
    assert found == [{**d, "configurations": ["sp", "no_sp"] if (d["file"], d["line"]) in everywhere else ["sp"]}
                     for d in mypy]
    assert {d["code"] for d in found} == {"spmd-invariant-mix", "return-value"} and found[0]["hint"]


def test_junit_xml_is_one_report_of_the_merged_diagnostics(
    project: Path, first_run: subprocess.CompletedProcess[str], tmp_path: Path
) -> None:
    report = tmp_path / "junit.xml"
    # one configuration at a time: sp ends first, the clean no_sp last, yet the report counts sp's error
    run = spmd_check(project, "--jobs", "1", "--junit-xml", str(report), "model.py")
    suite = ElementTree.parse(report).getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "1", "0"), run.stdout
    [failure] = suite.iter("failure")
    assert failure.text == "\n".join(run.stdout.splitlines()[:-1])  # the report's lines, labels included
    spmd_check(project, "--junit-xml", str(report), "--junit-format", "per_file", "model.py", "other.py")
    suite = ElementTree.parse(report).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("2", "2")
    assert sorted(case.get("file") for case in suite.iter("testcase")) == ["model.py", "other.py"]


def test_no_error_summary_is_honoured(project: Path, first_run: subprocess.CompletedProcess[str]) -> None:
    run = spmd_check(project, "--no-error-summary", "model.py")
    assert run.stdout.splitlines() == first_run.stdout.splitlines()[:-1] and run.returncode == 1


def test_colour_is_mypys_and_no_color_output_turns_it_off(
    project: Path, first_run: subprocess.CompletedProcess[str]
) -> None:
    coloured = spmd_check(project, "model.py", env=COLOURED)
    assert "\x1b[" in coloured.stdout.splitlines()[0] and "\x1b[" in coloured.stdout.splitlines()[-1]
    plain = spmd_check(project, "--no-color-output", "model.py", env=COLOURED)
    assert plain.stdout == first_run.stdout


@pytest.mark.parametrize("flags", [["--show-error-context", "--show-column-numbers", "--show-error-end"],
                                   ["--pretty", "--hide-error-codes"]])
def test_one_configurations_report_is_what_mypy_prints_in_it(
    project: Path, first_run: subprocess.CompletedProcess[str], flags: list[str]
) -> None:
    """Every output flag means what it means to mypy: with one configuration, nothing is labelled, and
    the lines are mypy's own, colours included."""
    run = spmd_check(project, "--configurations", "sp", *flags, "model.py", "other.py", env=COLOURED)
    mypy = mypy_in_sp(project, *flags, "model.py", "other.py", env=COLOURED)
    assert mypy.stdout.count("\n") >= 6 and "\x1b[" in mypy.stdout
    assert run.stdout.splitlines()[:-1] == mypy.stdout.splitlines()[:-1]


def test_a_terminal_sees_each_configuration_end(project: Path, first_run: subprocess.CompletedProcess[str]) -> None:
    leader, follower = pty.openpty()
    try:
        run = subprocess.run([*SPMD_CHECK, "model.py"], cwd=project, stdout=subprocess.PIPE, stderr=follower,
                             text=True, timeout=600)
    finally:
        os.close(follower)
    said = _read_terminal(leader).splitlines()
    assert said[0] == "spmd-check: checking sp, no_sp", said
    ends = sorted(re.sub(r"\(\d+ s\)$", "(N s)", line) for line in said[1:])
    assert ends in (["[1/2] no_sp: no errors (N s)", "[2/2] sp: 1 error (N s)"],
                    ["[1/2] sp: 1 error (N s)", "[2/2] no_sp: no errors (N s)"]), said
    assert run.stdout == first_run.stdout and first_run.stderr == ""  # not a terminal: nothing


def _read_terminal(leader: int) -> str:
    chunks = []
    try:
        while chunk := os.read(leader, 4096):
            chunks.append(chunk)
    except OSError:  # the other end closed
        pass
    finally:
        os.close(leader)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_a_setting_mypy_refuses_stops_spmd_check_once_with_mypys_message(project: Path) -> None:
    run = spmd_check(project, "--python-version", "2.0", "model.py")
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.count("Python major version '2' out of range (must be 3)") == 1, run.stderr


def test_a_blocking_error_is_reported_once_and_exits_2(
    project: Path, first_run: subprocess.CompletedProcess[str]
) -> None:
    (project / "broken.py").write_text("def f(:\n    pass\n")
    try:
        run = spmd_check(project, "broken.py")
        mypy = mypy_in_sp(project, "--no-error-summary", "broken.py")
    finally:
        (project / "broken.py").unlink()
    assert run.returncode == 2
    assert run.stdout.startswith("broken.py:1: error: ") and run.stdout == mypy.stdout, run.stdout
    assert sorted(run.stderr.splitlines()) == ["spmd-check: mypy stopped in configuration no_sp (exit status 2)",
                                               "spmd-check: mypy stopped in configuration sp (exit status 2)"]
