"""The set-up recipes of docs/checker.md work as written: the pyproject.toml config, pre-commit, CI, VS Code.

* The ``[tool.mypy]`` block says what spmd_mypy/recommended.ini says (the
  plugin, every skipped module, every setting), so the two cannot drift.
* The pre-commit recipe's hook, run as pre-commit runs a ``language:
  system`` hook (its entry, then the staged files), in a project configured
  by that block: it fails on an SPMD bug and passes once it is fixed.
* The GitHub Actions workflow, docs/ci/spmd-check.yml, passes actionlint,
  and the page shows it as it is.
* The VS Code settings are JSON.
"""

from __future__ import annotations

import configparser
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any, Callable

import yaml

from tests.editor.test_lsp import BUGGY, FIXED, docs_block
from tests.plugin.harness import ROOT

WORKFLOW = ROOT / "docs" / "ci" / "spmd-check.yml"


def _settings(value: Any) -> str:
    """A setting's value as both formats can write it: ``skip``, ``true``."""
    return str(value).lower()


def _from_ini(text: str) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    """mypy's global settings (plugins as a list) and each module's, from an ini config."""
    parser = configparser.ConfigParser()
    parser.read_string(text)
    settings: dict[str, Any] = {key: _settings(value) for key, value in parser["mypy"].items()}
    settings["plugins"] = [name.strip() for name in parser["mypy"]["plugins"].split(",")]
    modules: dict[str, dict[str, str]] = {}
    for section in parser.sections():
        if section.startswith("mypy-"):
            for module in section.removeprefix("mypy-").split(","):
                assert module not in modules, f"{module} in two sections"
                modules[module.strip()] = {key: _settings(value) for key, value in parser[section].items()}
    return settings, modules


def _from_toml(text: str) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    """The same from a pyproject.toml's ``[tool.mypy]`` and its ``[[tool.mypy.overrides]]``."""
    table = tomllib.loads(text)["tool"]["mypy"]
    settings: dict[str, Any] = {key: _settings(value) for key, value in table.items() if key != "overrides"}
    settings["plugins"] = list(table["plugins"])
    modules: dict[str, dict[str, str]] = {}
    for override in table.get("overrides", []):
        names = override["module"] if isinstance(override["module"], list) else [override["module"]]
        for module in names:
            assert module not in modules, f"{module} in two overrides"
            modules[module] = {key: _settings(value) for key, value in override.items() if key != "module"}
    return settings, modules


def test_the_pyproject_block_says_what_recommended_ini_says() -> None:
    ini_settings, ini_modules = _from_ini((ROOT / "spmd_mypy" / "recommended.ini").read_text())
    toml_settings, toml_modules = _from_toml(docs_block("toml", "[tool.mypy]"))
    assert toml_settings == ini_settings
    assert ini_settings["plugins"] == ["spmd_mypy"]
    assert toml_modules == ini_modules
    assert len(ini_modules) >= 10 and all(s == {"follow_imports": "skip"} for s in ini_modules.values())


def test_the_comparison_sees_a_module_left_out() -> None:
    """A block that skips one module less is told apart."""
    block = docs_block("toml", "[tool.mypy]")
    _, modules = _from_toml(block)
    first = next(iter(modules))
    _, fewer = _from_toml(block.replace(f'    "{first}",\n', "", 1))
    assert set(modules) - set(fewer) == {first}


def _precommit_hook() -> dict[str, Any]:
    [repo] = yaml.safe_load(docs_block("yaml", "repos:"))["repos"]
    assert repo["repo"] == "local"
    [hook] = repo["hooks"]
    return dict(hook)


def test_the_precommit_hook_fails_on_an_spmd_bug_and_passes_once_fixed(tmp_path: Path,
                                                                        kept_dir: Callable[[str], Path]) -> None:
    hook = _precommit_hook()
    assert hook["language"] == "system" and hook["types"] == ["python"]
    assert hook.get("pass_filenames", True), "pre-commit passes the staged files"
    (tmp_path / "pyproject.toml").write_text(docs_block("toml", "[tool.mypy]"))
    staged = tmp_path / "model.py"
    cache = kept_dir("recipes-mypy")
    # pre-commit runs a system hook's entry as a command, in the repository, with the staged files after it.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "MYPY_CACHE_DIR": str(cache / "mypy_cache"), "MYPY_FORCE_COLOR": "0"}
    command = [*hook["entry"].split(), *hook.get("args", []), "model.py"]
    assert shutil.which(command[0], path=env["PATH"]), command
    with open(cache / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        staged.write_text(BUGGY)
        failed = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        staged.write_text(FIXED)
        passed = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "model.py:6: error:" in failed.stdout and "[spmd-partial-affine]" in failed.stdout, failed.stdout
    assert passed.returncode == 0, passed.stdout + passed.stderr


def _actionlint(path: Path) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("actionlint", path=str(Path(sys.executable).parent))
    assert binary, "actionlint is in the test extra (pip install -e '.[test]')"
    return subprocess.run([binary, "-no-color", str(path)], capture_output=True, text=True, timeout=120)


def test_the_workflow_passes_actionlint() -> None:
    done = _actionlint(WORKFLOW)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_rejects_a_broken_workflow(tmp_path: Path) -> None:
    """The check can fail: the cache step without its required ``path``."""
    broken = tmp_path / "spmd-check.yml"
    broken.write_text(WORKFLOW.read_text().replace("          path: .mypy_cache\n", "", 1))
    done = _actionlint(broken)
    assert done.returncode == 1 and 'missing input "path"' in done.stdout, done.stdout + done.stderr


def test_the_workflow_checks_every_configuration_with_a_cache_per_commit() -> None:
    assert docs_block("yaml", WORKFLOW.read_text().splitlines()[0]) == WORKFLOW.read_text()
    [job] = yaml.safe_load(WORKFLOW.read_text())["jobs"].values()
    steps = job["steps"]
    runs = "\n".join(step.get("run", "") for step in steps)
    assert "--index-url https://download.pytorch.org/whl/cpu" in runs and "spmd-types-mypy[mypy]" in runs
    [cache] = [step["with"] for step in steps if step.get("uses", "").startswith("actions/cache@")]
    assert cache["path"] == ".mypy_cache"
    assert cache["key"] == "mypy-${{ runner.os }}-${{ hashFiles('pyproject.toml') }}-${{ github.sha }}"
    assert cache["restore-keys"].splitlines() == ["mypy-${{ runner.os }}-${{ hashFiles('pyproject.toml') }}-",
                                             "mypy-${{ runner.os }}-"]
    assert steps[-1]["run"].strip() == "spmd-check"


def test_the_vscode_settings_are_json_for_the_mypy_extension() -> None:
    settings = json.loads(docs_block("json", "{"))
    assert settings["mypy-type-checker.importStrategy"] == "fromEnvironment"
    assert settings["mypy-type-checker.preferDaemon"] is True
    [config] = settings["mypy-type-checker.args"]
    assert config.startswith("--config-file=") and config.endswith("/mypy-daemon.ini")
