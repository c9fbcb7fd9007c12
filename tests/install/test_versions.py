"""The plugin's entry point refuses a mypy outside the supported range with one error, and the range is pyproject's."""

from __future__ import annotations

import importlib
import json
import re
import sys
import tomllib
from pathlib import Path

import mypy.version
import pytest
from mypy.errors import CompileError
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from spmd_mypy import plugin, versions
from spmd_mypy.main import SpmdPlugin

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
PROJECT_VERSION = "0.1.0"
"""The version docs/checker.md's example message names."""


@pytest.mark.parametrize("version", ["2.3.1", "2.0.0", "1.19.1", "2.5.0", "2.5.0+dev.0123abcd", "3.0.0"])
def test_the_entry_point_refuses_another_mypy_with_one_error(version: str) -> None:
    with pytest.raises(CompileError) as caught:
        plugin(version)
    [message] = caught.value.messages
    assert f"this is mypy {version};" in message
    assert "supports mypy >=2.4,<2.5 only" in message
    assert "Fix: pip install 'mypy>=2.4,<2.5'" in message and "spmd-types-mypy[mypy]" in message


@pytest.mark.parametrize("version", ["2.4.0", "2.4.1", "2.4.2", mypy.version.__version__])
def test_the_entry_point_takes_the_supported_releases(version: str) -> None:
    assert plugin(version) is SpmdPlugin


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
    monkeypatch.setitem(sys.modules, "mypy.version", None)  # mypy not installed
    explained = versions.explain_import_failure(failure)
    assert explained is not None and "needs mypy >=2.4,<2.5, which is not installed" in explained


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


def test_the_documented_refusal_is_the_plugins() -> None:
    """docs/checker.md shows the error word for word (whatever the package's version)."""
    documented = (PYPROJECT.parent / "docs" / "checker.md").read_text()
    message = versions.unsupported_mypy("2.3.1").replace(versions.package_version(), PROJECT_VERSION)
    assert message in documented


def test_the_pre_commit_hook_installs_the_codemods_requirements() -> None:
    """pre-commit installs the repository without extras: the hook lists the [migrate] extra's requirements."""
    hooks = (PYPROJECT.parent / ".pre-commit-hooks.yaml").read_text()
    listed = re.search(r"^  additional_dependencies: (\[.*\])$", hooks, re.M)
    assert listed is not None
    migrate = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]["migrate"]
    assert sorted(json.loads(listed[1])) == sorted(migrate)


def test_under_another_mypy_the_plugins_modules_are_not_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mypy whose API the hooks cannot import still gets the one error: spmd_mypy.plugin only reports."""
    import spmd_mypy

    monkeypatch.setattr(mypy.version, "__version__", "3.0.0")
    assert spmd_mypy.plugin is versions.refusing_plugin
    with pytest.raises(CompileError) as caught:
        spmd_mypy.plugin("3.0.0")
    assert caught.value.messages == [versions.unsupported_mypy("3.0.0")]
