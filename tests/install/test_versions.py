"""Which mypy the plugin runs under: the case files under every supported mypy release, a newer 2.x with a
warning, any other mypy refused with one error on stdout; and the range is pyproject's."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Callable

import mypy.version
import pytest
from mypy.errors import CompileError
from mypy.options import Options
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from spmd_mypy import plugin, versions
from spmd_mypy.main import SpmdPlugin
from tests.install import mypy_releases
from tests.plugin.harness import CASES

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
PROJECT_VERSION = "0.1.0"
"""The version docs/checker.md's example message names."""
RELEASES = ["2.0.0", "2.1.0", "2.2.0", "2.3.1", "2.4.0"]
"""Every supported mypy release on the package index but the one the test environment pins, whose run is the
whole of tests/plugin.  A new release: run ``python -m tests.install.mypy_releases VERSION`` (docs/checker.md,
"Supported versions"), then add it here."""
SAMPLE = ["annotations", "hints", "robustness"]
"""The case directories run under each release: annotations read back from source (several lines, non-ASCII
text before them, quoted), fix edits that quote and place source text, and odd inputs: what the parser
places changed between releases (mypy 2.4's native parser).  The whole case set under each release costs
about 1.7 times as much (docs/checker.md, "Supported versions"); a maintainer runs it by hand."""
REFUSED = "1.20.2"
"""The newest mypy 1.x: a real mypy that the plugin refuses."""


@pytest.fixture(scope="session")
def releases_dir(kept_dir: Callable[[str], Path]) -> Path:
    return kept_dir(mypy_releases.RELEASES_DIR)


def _installed(version: str, root: Path) -> Path:
    try:
        return mypy_releases.install(version, root)
    except mypy_releases.Unavailable as error:
        pytest.fail(str(error), pytrace=False)


@pytest.mark.parametrize("release", RELEASES)
def test_the_case_files_pass_under_every_supported_release(release: str, releases_dir: Path) -> None:
    target = _installed(release, releases_dir)
    found = mypy_releases.problems_under(target, [CASES / name for name in SAMPLE], releases_dir / f"{release}-cache")
    assert not found, "\n".join(f"{case.relative_to(CASES)}:\n  " + "\n  ".join(problems)
                                for case, problems in found.items())


def test_every_tested_minor_release_is_run() -> None:
    """Each minor release from the oldest supported to the newest tested has a release in RELEASES (or is the
    environment's), and none outside that range is called tested."""
    pinned = versions.mypy_minor(mypy.version.__version__)
    minors = {versions.mypy_minor(release) for release in RELEASES} | {pinned}
    oldest, newest = versions.MYPY_OLDEST, versions.MYPY_NEWEST_TESTED
    assert minors == {(oldest[0], minor) for minor in range(oldest[1], newest[1] + 1)}


def test_an_unsupported_mypy_stops_with_one_error_on_stdout(releases_dir: Path, tmp_path: Path) -> None:
    """A real mypy 1.x: exit 2, the error at the config file's ``plugins`` line on stdout, no traceback."""
    target = _installed(REFUSED, releases_dir)
    (tmp_path / "mypy.ini").write_text(f"[mypy]\nmypy_path = {PYPROJECT.parent}\nplugins = spmd_mypy\n")
    (tmp_path / "t.py").write_text("x: int = 1\n")
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "t.py"],
                          cwd=tmp_path, capture_output=True, text=True, env={**_environment(), "PYTHONPATH": str(target)})
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"mypy.ini:3: error: {versions.unsupported_mypy(REFUSED)}\n" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr and "INTERNAL ERROR" not in done.stdout


def _environment() -> dict[str, str]:
    """This process's environment without paths that would pick another mypy or other stubs."""
    return {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}


@pytest.mark.parametrize("version", ["1.20.2", "1.19.1", "3.0.0", "0.991"])
def test_the_entry_point_refuses_another_mypy_with_one_error(version: str) -> None:
    """Called with a version other than the installed mypy's (mypy itself gets ``refusing_plugin``)."""
    with pytest.raises(CompileError) as caught:
        plugin(version)
    assert caught.value.use_stdout
    [message] = caught.value.messages
    assert message == f"spmd_mypy: error: {versions.unsupported_mypy(version)}"
    assert f"this is mypy {version};" in message and "supports mypy >=2.0,<3.0 only" in message
    assert "Fix: pip install 'mypy>=2.0,<3.0'" in message and "spmd-types-mypy[mypy]" in message


@pytest.mark.parametrize("config", [("mypy.ini", "[mypy]\nstrict = true\nplugins = spmd_mypy\n", 3),
                                    ("pyproject.toml", '[tool.black]\n\n[tool.mypy]\nplugins = ["spmd_mypy"]\n', 4),
                                    ("setup.cfg", "[mypy]\nplugins = a, spmd_mypy\nplugins = b\n", 1)])
def test_the_refusing_plugin_names_the_plugins_line(config: tuple[str, str, int], tmp_path: Path) -> None:
    """The error points where mypy's own plugin errors do: the ``plugins`` line, line 1 when it is ambiguous."""
    name, text, line = config
    (tmp_path / name).write_text(text)
    options = Options()
    options.config_file = str(tmp_path / name)
    with pytest.raises(CompileError) as caught:
        versions.refusing_plugin("1.20.2")(options)
    assert caught.value.use_stdout
    assert caught.value.messages == [f"{tmp_path / name}:{line}: error: {versions.unsupported_mypy('1.20.2')}"]


@pytest.mark.parametrize("version", ["2.0.0", "2.3.1", "2.4.1", mypy.version.__version__])
def test_the_entry_point_takes_the_tested_releases_silently(version: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert plugin(version) is SpmdPlugin
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("version", ["2.5.0rc1", "2.5.0+dev.0123abcd", "2.13.2"])
def test_a_newer_2x_runs_with_a_warning_on_stderr(version: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert plugin(version) is SpmdPlugin
    assert plugin(version) is SpmdPlugin  # mypy's daemon calls the entry point on every check: one warning
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == versions.untested_mypy(version) + "\n"
    assert f"this is mypy {version}, newer than" in captured.err and "pip install 'mypy>=2.0,<2.5'" in captured.err


def _requirements(names: list[str]) -> list[Requirement]:
    return [Requirement(text) for text in names]


def test_the_range_is_the_one_pyproject_requires() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    extras = project["optional-dependencies"]
    for extra in ("mypy", "migrate"):
        [mypy] = [r for r in _requirements(extras[extra]) if r.name == "mypy"]
        assert mypy.specifier == SpecifierSet(versions.MYPY_RANGE), extra
    [pinned] = [r for r in _requirements(extras["test"]) if r.name == "mypy"]
    assert versions.mypy_supported(str(pinned.specifier).removeprefix("=="))
    assert not any(r.name in ("mypy", "libcst") for r in _requirements(project["dependencies"]))


def test_an_import_that_fails_under_another_mypy_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    failure = ImportError("cannot import name 'ReportConfigContext' from 'mypy.plugin'")
    assert versions.explain_import_failure(failure) is None  # the supported mypy: the error stands as it is
    monkeypatch.setattr(mypy.version, "__version__", "3.0.0")
    explained = versions.explain_import_failure(failure)
    assert explained is not None and "this is mypy 3.0.0;" in explained and "ReportConfigContext" in explained
    monkeypatch.setattr(mypy.version, "__version__", "2.5.0")  # supported, untested: the warning says why
    explained = versions.explain_import_failure(failure)
    assert explained is not None and "this is mypy 2.5.0, newer than" in explained and "ReportConfigContext" in explained
    monkeypatch.setitem(sys.modules, "mypy.version", None)  # mypy not installed
    explained = versions.explain_import_failure(failure)
    assert explained is not None and "needs mypy >=2.0,<3.0, which is not installed" in explained


def test_the_package_knows_its_version() -> None:
    assert versions.package_version() == tomllib.loads(PYPROJECT.read_text())["project"]["version"]


@pytest.mark.parametrize("command", ["spmd-migrate", "spmd-coverage", "spmd-check"])
def test_every_command_prints_the_package_version(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    scripts = tomllib.loads(PYPROJECT.read_text())["project"]["scripts"]
    module, _, function = scripts[command].partition(":")
    with pytest.raises(SystemExit) as stopped:
        getattr(importlib.import_module(module), function)(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out == f"{command} {versions.package_version()}\n"


def test_the_documented_refusal_and_warning_are_the_plugins() -> None:
    """docs/checker.md shows the error and the warning word for word (whatever the package's version)."""
    documented = (PYPROJECT.parent / "docs" / "checker.md").read_text()
    message = versions.unsupported_mypy(REFUSED).replace(versions.package_version(), PROJECT_VERSION)
    assert f"mypy.ini:2: error: {message}" in documented
    assert versions.untested_mypy("2.5.0").replace(versions.package_version(), PROJECT_VERSION) in documented


def test_the_pre_commit_hook_runs_in_the_users_environment() -> None:
    """A hook environment of its own would install the repository's torch requirement (a CUDA wheel):
    the hook runs the spmd-migrate of the environment pre-commit runs in."""
    hooks = (PYPROJECT.parent / ".pre-commit-hooks.yaml").read_text()
    assert re.search(r"^  language: system$", hooks, re.M)
    assert "additional_dependencies" not in hooks


def test_under_another_mypy_the_plugins_modules_are_not_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mypy whose API the hooks cannot import still gets the one error: spmd_mypy.plugin only reports."""
    import spmd_mypy

    monkeypatch.setattr(mypy.version, "__version__", "3.0.0")
    assert spmd_mypy.plugin is versions.refusing_plugin
    options = Options()
    options.config_file = "mypy.ini"
    with pytest.raises(CompileError) as caught:
        spmd_mypy.plugin("3.0.0")(options)
    assert caught.value.messages == [f"mypy.ini:1: error: {versions.unsupported_mypy('3.0.0')}"]
