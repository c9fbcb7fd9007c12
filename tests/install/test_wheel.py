"""The sdist and the wheel built from the checkout, and the wheel installed into a fresh environment.

``python -m build`` builds the sdist from a copy of the checkout, then the
wheel from the unpacked sdist (so the sdist is complete too).  One fresh
virtual environment then goes through a user's steps: torch 2.13.0 first
(pinned, so pip takes the local CPU wheel), the wheel without extras (the
runtime alone: neither mypy nor libcst comes with it), then with
``[migrate]``, whose commands run and whose plugin reports a real SPMD
error on a tiny project configured as the README says; last, mypy 1.20.2
in its place, which the plugin refuses with one error on stdout.
"""

from __future__ import annotations

import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
NAME, VERSION = PROJECT["name"], PROJECT["version"]
DIST_INFO = f"{NAME.replace('-', '_')}-{VERSION}.dist-info"
NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", ".mypy_cache", ".pytest_cache", ".hypothesis", "*.egg-info", "build", "dist")
DATA = [
    "spmd_stubs/py.typed", "spmd_mypy/py.typed", "spmd_mypy/recommended.ini",
    "spmd_mypy/overlays/fairscale.toml", "spmd_mypy/overlays/megatron_core.toml",
]

USER_CODE = """\
from spmd_stubs import P, R, Tensor
from spmd_stubs.axes import tp


def f(a: Tensor[P@tp], b: Tensor[R@tp]) -> Tensor[P@tp]:
    return a + b
"""


def _run(command: list[str | Path], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """A command outside the development environment: no PYTHONPATH, no MYPYPATH, no active virtualenv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    return subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _ok(command: list[str | Path], cwd: Path, timeout: int = 600) -> str:
    done = _run(command, cwd, timeout)
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(the copy of the checkout built from, the wheel, the sdist)."""
    base = tmp_path_factory.mktemp("build")
    source = base / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES)
    _ok([sys.executable, "-m", "build", "--no-isolation", "--outdir", base / "dist", source], base)
    [wheel] = (base / "dist").glob("*.whl")
    [sdist] = (base / "dist").glob("*.tar.gz")
    return source, wheel, sdist


def _package_files(source: Path) -> set[str]:
    return {p.relative_to(source).as_posix() for package in ("spmd_stubs", "spmd_mypy")
            for p in (source / package).rglob("*.py") if "__pycache__" not in p.parts}


def test_the_wheel_holds_every_module_its_data_and_no_tests(built: tuple[Path, Path, Path]) -> None:
    source, wheel, _ = built
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {n.split("/")[0] for n in names} == {"spmd_stubs", "spmd_mypy", DIST_INFO}
    assert {n for n in names if n.endswith(".py")} == _package_files(source)
    assert set(DATA) <= names, set(DATA) - names
    assert f"{DIST_INFO}/licenses/LICENSE" in names
    assert not [n for n in names if "/tests/" in n or n.startswith("tests/")]


def test_the_sdist_builds_the_same_wheel(built: tuple[Path, Path, Path]) -> None:
    _, _, sdist = built
    with tarfile.open(sdist) as archive:
        names = {n.partition("/")[2] for n in archive.getnames()}
    assert {"pyproject.toml", "README.md", "LICENSE", *DATA} <= names
    assert not [n for n in names if n.startswith("tests/")], "no tests: they run from a checkout (MANIFEST.in)"


def _metadata(wheel: Path) -> email.message.Message:
    return email.parser.Parser().parsestr(zipfile.ZipFile(wheel).read(f"{DIST_INFO}/METADATA").decode())


def test_the_metadata_asks_the_runtime_for_torch_only(built: tuple[Path, Path, Path]) -> None:
    metadata = _metadata(built[1])
    requires = metadata.get_all("Requires-Dist") or []
    unconditional = sorted(r for r in requires if "extra ==" not in r)
    assert unconditional == ["torch>=2.13", "typing_extensions>=4.12"]
    assert 'mypy<3.0,>=2.0; extra == "mypy"' in requires
    assert 'libcst>=1.9; extra == "migrate"' in requires and 'mypy<3.0,>=2.0; extra == "migrate"' in requires
    pythons = {f"Programming Language :: Python :: 3.{minor}" for minor in (11, 12, 13)}
    assert {"Typing :: Typed", *pythons} <= set(metadata.get_all("Classifier") or [])
    assert metadata["License-Expression"] == "MIT"
    assert "Homepage, https://github.com/spmd-types/spmd-types-mypy" in (metadata.get_all("Project-URL") or [])


def test_the_long_description_links_only_absolute_urls(built: tuple[Path, Path, Path]) -> None:
    """PyPI shows the README without the repository around it: a relative link would lead nowhere."""
    description = _metadata(built[1]).get_payload()
    assert isinstance(description, str) and "## Install" in description
    relative = re.findall(r"\]\((?!https?://|#)([^)]*)\)", description)
    assert relative == []


def _installed(venv: Path) -> set[str]:
    listed = json.loads(_ok([venv / "bin/pip", "list", "--format", "json"], venv))
    return {p["name"].lower() for p in listed}


def test_a_fresh_environment_runs_the_runtime_then_the_checker(
    built: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    wheel = built[1]
    venv, project = tmp_path / "venv", tmp_path / "project"
    _ok([sys.executable, "-m", "venv", venv], tmp_path)
    pip, python = venv / "bin/pip", venv / "bin/python"
    _ok([pip, "install", "--quiet", "torch==2.13.0"], tmp_path)

    # The runtime alone: what pip would install for the wheel, then the install itself.
    report = tmp_path / "report.json"
    _ok([pip, "install", "--quiet", "--dry-run", "--report", report, wheel], tmp_path)
    wanted = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert NAME in wanted and not wanted & {"mypy", "libcst", "torch"}, wanted
    _ok([pip, "install", "--quiet", wheel], tmp_path)
    assert not _installed(venv) & {"mypy", "libcst"}
    runtime = ("import importlib.util, torch; from spmd_stubs import R, Tensor; from spmd_stubs.axes import tp; "
               "assert Tensor[R@tp] is torch.Tensor; print(importlib.util.find_spec('mypy'))")
    assert _ok([python, "-c", runtime], tmp_path).strip() == "None"

    # The checker and the codemod.
    _ok([pip, "install", "--quiet", f"{wheel}[migrate]"], tmp_path)
    assert {"mypy", "libcst"} <= _installed(venv)
    _ok([pip, "check"], tmp_path)
    for command in ("spmd-migrate", "spmd-coverage", "spmd-check"):
        assert _ok([venv / "bin" / command, "--version"], tmp_path) == f"{command} {VERSION}\n"
    project.mkdir()
    (project / "pyproject.toml").write_text('[tool.mypy]\nplugins = ["spmd_mypy"]\n')
    (project / "t.py").write_text(USER_CODE)
    where = _ok([python, "-c", "import spmd_mypy; print(spmd_mypy.__file__)"], project)
    assert Path(where).is_relative_to(venv), where
    checked = _run([venv / "bin/mypy", "--cache-dir", tmp_path / "cache", "t.py"], project)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert re.search(r"^t\.py:6: error: .*\[spmd-partial-affine\]$", checked.stdout, re.M), checked.stdout
    # The shipped overlays by name, from the installed package.
    _ok([venv / "bin/spmd-migrate", "--quiet", "--overlay", "megatron-core", "--overlay", "fairscale", "t.py"], project)

    # An unsupported mypy in the environment: one error on stdout, mypy's exit status 2, no traceback.
    _ok([pip, "install", "--quiet", "mypy==1.20.2"], tmp_path)
    refused = _run([venv / "bin/mypy", "--cache-dir", tmp_path / "cache-1.20", "t.py"], project)
    output = refused.stdout + refused.stderr
    assert refused.returncode == 2, output
    assert re.search(r"^pyproject\.toml:2: error: this is mypy 1\.20\.2; .* supports mypy >=2\.0,<3\.0 only",
                     refused.stdout, re.M), output
    assert "Traceback" not in output and "INTERNAL ERROR" not in output
