"""The SPMD checks work the same under the mypy settings teams use, and add no error of their own.

The bug gallery and the GPT example are checked under each setting, in the
examples' first configuration (sequence parallelism on, examples/mypy.ini),
and compared with the default run: the same ``spmd-*`` diagnostics, and no other
error, except under ``--strict``, whose own rules flag torch's unannotated
``Tensor.backward`` and a value returned from a line the checker already
rejected (mypy types a failed operator as ``Any``), and under
``--disallow-any-expr``, whose own rule flags the untyped values of plain
code (the launcher's queues): never a tensor, since an unknown SPMD type is
a special form mypy does not count as ``Any`` (but a canonical type alias's
own definition is reported there).  mypy's parallel workers
(``-n``) are refused beside configurations (tests/configurations): under
them the gallery alone is checked, without configurations.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

import spmd_stubs
from tests.plugin.harness import ROOT, config_text, run_mypy

FILES = [Path("examples/bugs"), Path("examples/gpt")]
SETTINGS = [
    "--no-implicit-reexport",
    "--disallow-any-generics",
    "--allow-redefinition-old",
    "--no-local-partial-types",
    "--warn-unreachable",
    "--python-version=3.12",
    "--python-version=3.13",
    "--disallow-any-expr",
    "-n=2",
    "--no-native-parser",
    "--strict",
]
STRICT_OWN = ('Call to untyped function "backward" in typed context  [no-untyped-call]', "[no-any-return]")


def _any_expression_of_plain_code(line: str) -> bool:
    """``--disallow-any-expr``'s own finding on code that is not a tensor (the launcher's queues, argparse)."""
    return ('Expression has type "Any"' in line or 'Expression type contains "Any"' in line) and "Tensor" not in line


def _configurations() -> str:
    """examples/mypy.ini's ``[spmd_mypy]`` section: the GPT's configurations."""
    examples = (ROOT / "examples" / "mypy.ini").read_text()
    return examples[examples.index("[spmd_mypy]"):]


def _canonical_alias_definition(line: str) -> bool:
    """``--disallow-any-expr`` on a type alias in the canonical spelling (``Activation = Tensor[S[0, tp]] ...``):
    mypy types the alias's own expression ``type[Tensor[...]]``, which it counts as containing ``Any``
    (docs/checker.md#limitations)."""
    return 'Expression type contains "Any" (has type "type[Tensor[' in line


def _check(flags: list[str], cache: Path, tmp_path: Path) -> list[str]:
    workers = any(flag.startswith(("-n", "--num-workers")) for flag in flags)
    config = tmp_path / "mypy.ini"
    config.write_text(config_text("" if workers else _configurations()))
    output = run_mypy(FILES[:1] if workers else FILES, config, cache, cwd=ROOT, flags=flags)
    return sorted(line for line in output.splitlines() if ": error:" in line)


@pytest.fixture(scope="module")
def default_errors(tmp_path_factory: pytest.TempPathFactory, kept_dir: Callable[[str], Path]) -> list[str]:
    cache = kept_dir("settings-default")
    return _check([], cache, tmp_path_factory.mktemp("default"))


def test_the_default_run_reports_the_gallery(default_errors: list[str]) -> None:
    """One spmd error per bug of the gallery, none in its fixed twins or the GPT."""
    bugs = sorted((ROOT / "examples" / "bugs").glob("*_bug.py"))
    assert len(default_errors) == len(bugs) and all("[spmd-" in line for line in default_errors), default_errors
    assert sorted(line.split(":")[0] for line in default_errors) == [str(bug.relative_to(ROOT)) for bug in bugs]


@pytest.mark.parametrize("setting", SETTINGS)
def test_same_spmd_verdicts_and_nothing_else(setting: str, default_errors: list[str], tmp_path: Path,
                                             kept_dir: Callable[[str], Path]) -> None:
    name = setting.strip("-").replace("=", "-")
    cache = kept_dir(f"settings-{name}")
    errors = _check([setting], cache, tmp_path)
    assert [line for line in errors if "[spmd-" in line] == default_errors
    others = [line for line in errors if "[spmd-" not in line]
    if setting == "--strict":
        others = [line for line in others if not line.endswith(STRICT_OWN)]
    if setting == "--disallow-any-expr":
        others = [line for line in others if not _any_expression_of_plain_code(line)
                  and not _canonical_alias_definition(line)]
    assert others == []


def test_the_public_api_is_exported_under_every_reexport_rule() -> None:
    """``__all__`` is a literal (mypy reads it) naming every lazily exported name."""
    vocabulary = {"Tensor", "Group", "R", "I", "V", "P", "Pavg", "Pmax", "Pmin", "S", "Sharded", "MeshAxis",
                  "AxisAnnotation", "assert_type", "flags"}
    assert set(spmd_stubs.__all__) == vocabulary | set(spmd_stubs._LAZY)
    assert len(spmd_stubs.__all__) == len(set(spmd_stubs.__all__))


REDEFINED = "def f() -> None:\n    x = 1\n    print(x)\n    x = 'a'\n    print(x)\n"


@pytest.mark.parametrize(("own_setting", "redefinition_allowed"), [("", True), ("allow_redefinition = False\n", False)])
def test_a_users_own_redefinition_setting_wins(own_setting: str, redefinition_allowed: bool, tmp_path: Path,
                                               kept_dir: Callable[[str], Path]) -> None:
    """The plugin turns allow_redefinition on by default, but never over the user's own ``[mypy]`` choice."""
    (tmp_path / "t.py").write_text(REDEFINED)
    config = tmp_path / "mypy.ini"
    config.write_text(config_text().replace("[mypy]\n", f"[mypy]\n{own_setting}", 1))
    cache = kept_dir("settings-default")
    output = run_mypy([Path("t.py")], config, cache, cwd=tmp_path)
    assert ("Incompatible types in assignment" not in output) == redefinition_allowed, output


def test_a_plugin_setting_change_rechecks_only_user_code(tmp_path: Path, kept_dir: Callable[[str], Path]) -> None:
    """``[spmd_mypy] strict`` changes verdicts on SPMD code only: the standard library's and torch's cache stay."""
    (tmp_path / "t.py").write_text("import torch\n\nx = torch.ones(2)\n")
    cache = tmp_path / "cache"
    shutil.copytree(kept_dir("settings-default"), cache, dirs_exist_ok=True)
    config = tmp_path / "mypy.ini"
    for strict in ("false", "true"):
        config.write_text(config_text(f"[spmd_mypy]\nstrict = {strict}\n"))
        log = run_mypy([Path("t.py")], config, cache, cwd=tmp_path, flags=["--verbose"], log=True)
    abandoned = {line.split("Metadata abandoned for ")[1].split(":")[0] for line in log.splitlines()
                 if "plugin configuration differs" in line}
    assert abandoned == {"t"}, abandoned



def test_a_bad_plugin_setting_stops_mypy_with_a_clear_error(tmp_path: Path) -> None:
    """Named with its file, key and fix, the way mypy reports its own bad settings: no crash, no traceback."""
    (tmp_path / "t.py").write_text("x = 1\n")
    config = tmp_path / "mypy.ini"
    config.write_text(config_text("[spmd_mypy]\ngroups = *.tp_group: 1\n"))
    command = [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir", str(tmp_path / "cache"), "t.py"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert f"{config}: error: [spmd_mypy] groups: the axis of '*.tp_group' must be a mesh axis name" in output
    assert "INTERNAL ERROR" not in output and "Traceback" not in output


PYPROJECT = '[tool.mypy]\nplugins = ["spmd_mypy"]\n\n[tool.spmd_mypy]\n'


@pytest.mark.parametrize(("setting", "error"), [
    ('strict = "maybe"', "[tool.spmd_mypy] strict must be true or false (a TOML boolean, unquoted), got 'maybe'"),
    ('collectives = { "lib.gather" = "torch.distributed.gather_object" }',
     "[tool.spmd_mypy] collectives: lib.gather: torch.distributed.gather_object names no torch.distributed collective the "
     "checker types; the collectives are _all_gather_base, _reduce_scatter_base, all_gather, all_gather_into_tensor, "
     "all_gather_single, all_gather_tensor, all_reduce, all_to_all, all_to_all_single, broadcast, gather, reduce, "
     "reduce_scatter, reduce_scatter_single, reduce_scatter_tensor, scatter"),
    ("strikt = true", "[tool.spmd_mypy] has no setting 'strikt' (set to true; did you mean 'strict'?): "
                      "the settings are strict, allow_redefinition, show_fixes, groups, sizes, collectives, "
                      "configurations, modules, current_mesh, meshes "
                      "(docs/checker.md#settings)"),
    ('current_mesh = ["dp", "tp", "dp"]', "[tool.spmd_mypy] current_mesh must name each axis of the current mesh once, "
                                          "comma-separated (current_mesh = dp, cp, tp), got ['dp', 'tp', 'dp']"),
    ('meshes = { dense = ["dp", "tp", "tp"] }', "[tool.spmd_mypy] meshes: 'dense' must name a mesh and each of its axes "
                                                "once, got ['dp', 'tp', 'tp']; write NAME: (axis, ...) per mesh, "
                                                "outermost axis first (meshes = dense: (dp, cp, tp), experts: (dp, ep))"),
])
def test_a_bad_setting_in_pyproject_toml_is_one_error_naming_it(setting: str, error: str, tmp_path: Path) -> None:
    """The ``[tool.spmd_mypy]`` form: the key, its value and what is allowed, in one error with exit status 2;
    never mypy's INTERNAL ERROR or a traceback."""
    (tmp_path / "t.py").write_text("x = 1\n")
    (tmp_path / "pyproject.toml").write_text(PYPROJECT + setting + "\n")
    command = [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "t.py"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert [line for line in output.splitlines() if "error:" in line] == [f"pyproject.toml: error: {error}"], output
    assert "INTERNAL ERROR" not in output and "Traceback" not in output
