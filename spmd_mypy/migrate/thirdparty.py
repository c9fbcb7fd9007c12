"""Check third-party tensor-parallel code: copy it, annotate and migrate the copy, run mypy.

The supported workflow for code nobody here maintains (fairscale,
megatron-core): the installed package is never edited; a copy is made,
:mod:`.overlay` and the codemod rewrite the copy, and mypy with the
``spmd_mypy`` plugin checks the chosen modules of the copy while every other
module of those packages is skipped (unknown, ``Any``), which keeps the run
to the layers of interest.
"""

from __future__ import annotations

import configparser
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import spmd_stubs

__all__ = ["installed_dir", "copy_installed", "mypy_config", "Diagnostic", "MypyRun", "run_mypy"]

RECOMMENDED_CONFIG = Path(__file__).resolve().parents[1] / "recommended.ini"
"""The config users are told to start from: the plugin, and torch internals skipped."""


def installed_dir(package: str) -> Path:
    """Where an installed top-level package lives (namespace packages included), without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"{package} is not an installed package")
    return Path(next(iter(spec.submodule_search_locations)))


def copy_installed(packages: Sequence[str], destination: Path) -> Path:
    """Copy whole installed packages under ``destination`` (so the copies still import)."""
    for package in packages:
        shutil.copytree(installed_dir(package), destination / package, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return destination


def _project_root() -> Path:
    """The directory holding ``spmd_stubs`` and ``spmd_mypy`` (a checkout or site-packages)."""
    return Path(spmd_stubs.__file__).resolve().parent.parent


def mypy_config(root: Path, skipped_packages: Sequence[str], configurations: str = "", modules: str = "",
                strict: bool = False, collectives: str = "") -> str:
    """A mypy.ini for checking copied modules under ``root`` with the plugin.

    The shipped recommended config (the plugin, torch internals skipped),
    plus: ``check_untyped_defs``, since third-party bodies are mostly
    unannotated and mypy would not look inside them otherwise,
    ``explicit_package_bases``, so a module of a namespace package (megatron
    has no ``megatron/__init__.py``) is named from ``root``
    (``megatron.core.transformer.mlp``, as its imports and the
    ``[spmd_mypy]`` settings name it, not ``core.transformer.mlp``), the
    packages not chosen for checking skipped, and the ``configurations`` the
    layers' flags are checked in, the ``modules`` whose class is chosen
    at run time, the library's own names of ``collectives`` and ``strict``
    (``[spmd_mypy]``'s lines, if any).
    """
    config = configparser.ConfigParser()
    config.read_string(RECOMMENDED_CONFIG.read_text())
    config["mypy"].update(
        {
            "mypy_path": f"{root}:{_project_root()}",
            "check_untyped_defs": "True",
            "explicit_package_bases": "True",
            "ignore_missing_imports": "True",
            "follow_imports": "silent",
        }
    )
    if skipped_packages:
        config["mypy-" + ",".join(f"{name}.*" for name in skipped_packages)] = {"follow_imports": "skip"}
    settings = {"configurations": configurations, "modules": modules, "collectives": collectives,
                "strict": "true" if strict else ""}
    if any(settings.values()):
        config["spmd_mypy"] = {key: value for key, value in settings.items() if value}
    text = io.StringIO()
    config.write(text)
    return text.getvalue()


@dataclass(frozen=True)
class Diagnostic:
    path: str
    line: int
    severity: str
    message: str
    code: str | None
    configurations: str = ""
    """Where ``spmd-check`` found it (``sp, no_sp``); empty for every configuration."""

    @property
    def is_spmd(self) -> bool:
        return self.code is not None and self.code.startswith("spmd")


@dataclass(frozen=True)
class MypyRun:
    returncode: int
    output: str
    diagnostics: tuple[Diagnostic, ...]

    @property
    def crashed(self) -> bool:
        return self.returncode not in (0, 1) or "INTERNAL ERROR" in self.output or "Traceback" in self.output


_LINE = re.compile(
    r"^(?P<path>[^:\n]+):(?P<line>\d+): (?P<severity>error|note): (?:\[(?P<label>[\w, -]+)\] )?(?P<message>.*?)"
    r"(?:  \[(?P<code>[\w-]+)\])?$"
)


def run_mypy(root: Path, files: Sequence[Path], skipped_packages: Sequence[str], cache_dir: Path,
             configurations: str = "", modules: str = "", strict: bool = False, collectives: str = "") -> MypyRun:
    """Run mypy with the plugin over ``files`` (paths under ``root``) and parse what it says; with
    ``configurations``, ``spmd-check`` in each of them; the rest as in :func:`mypy_config`."""
    config = root / "spmd-mypy.ini"
    config.write_text(mypy_config(root, skipped_packages, configurations, modules, strict, collectives))
    runner = "spmd_mypy.configurations.cli" if configurations else "mypy"
    command = [sys.executable, "-m", runner, "--config-file", str(config), "--cache-dir", str(cache_dir),
               "--show-error-codes", "--no-error-summary", "--hide-error-context", "--no-pretty",
               *(str(f.relative_to(root)) for f in files)]
    # mypy imports the plugin with the ordinary import system: put the project
    # first, so an editable install made before spmd_mypy had an __init__.py
    # (a namespace package then) cannot hide the plugin's entry point.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_project_root()), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, env=env)
    output = done.stdout + done.stderr
    diagnostics = tuple(
        Diagnostic(m["path"], int(m["line"]), m["severity"], m["message"], m["code"], m["label"] or "")
        for m in map(_LINE.match, output.splitlines()) if m
    )
    return MypyRun(done.returncode, output, diagnostics)
