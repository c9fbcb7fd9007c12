"""mypy over real untyped code, without and with the plugin: the error lists must be equal.

The plugin checks only what carries SPMD types; on code that has none it must
change nothing mypy says.  Each comparison copies installed packages out of
site-packages (checked in place, site-packages would become a source root),
writes two configs that differ only in ``plugins = spmd_mypy``, runs mypy
once per side and compares the reports line by line.

One text difference is expected and normalised: the plugin gives
``torch.Tensor`` and ``torch.distributed.ProcessGroup`` a hidden type
parameter whose default is ``Any``, and mypy's formatter prints every type
argument, so a plain tensor prints as ``Tensor[Any]`` (its class object as
``type[Tensor[_SpmdType]]``), a plain group as ``ProcessGroup[Any]``, where
mypy alone prints ``Tensor`` and ``ProcessGroup``.  Nothing else is
normalised.

Modules written for spmd_types (torchtitan's: they import it) carry SPMD
types the plugin reads, so what it says there is its own verdict, pinned by
tests/third_party/test_torchtitan.py: their lines are left out of both
sides.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parents[2]
_SPMD_TYPES_IMPORT = re.compile(r"^\s*(?:import|from) spmd_types\b", re.MULTILINE)
SITE = Path(next(p for p in sys.path if p.endswith("site-packages")))

# Installed code bases (PyPI, installed without dependencies by the set-up).
CODE_BASES = {
    "megatron-core": SITE / "megatron" / "core",
    "fairscale": SITE / "fairscale",
    "torchtitan": SITE / "torchtitan",
    "torch.distributed.tensor.parallel": SITE / "torch" / "distributed" / "tensor" / "parallel",
}

# mypy settings the plugin must not change mypy's verdicts under: name -> command-line flags.
SETTINGS: dict[str, tuple[str, ...]] = {
    "default": (),
    "check-untyped-defs": ("--check-untyped-defs",),
    "strict": ("--strict",),
    "allow-redefinition": ("--allow-redefinition",),
    "allow-redefinition-old": ("--allow-redefinition-old",),
    "no-local-partial-types": ("--no-local-partial-types", "--check-untyped-defs"),
    "warn-unreachable": ("--warn-unreachable", "--check-untyped-defs"),
    "disallow-any-expr": ("--disallow-any-expr",),
    "python-3.12": ("--python-version", "3.12", "--check-untyped-defs"),
    "python-3.13": ("--python-version", "3.13", "--check-untyped-defs"),
    "parallel": ("-n", "2", "--check-untyped-defs"),
}

_HIDDEN_PARAMETER = re.compile(r"\b(Tensor|ProcessGroup)\[(?:Any|_SpmdType|_MeshAxis)\]")
_ERROR = re.compile(r"^[^:\n]+:\d+: (error|note): ")


@dataclass(frozen=True)
class Comparison:
    setting: str
    files: int
    lines: int
    without: tuple[str, ...]
    with_plugin: tuple[str, ...]
    seconds: float

    @property
    def only_without(self) -> list[str]:
        return sorted(set(self.without) - set(self.with_plugin))

    @property
    def only_with(self) -> list[str]:
        return sorted(set(self.with_plugin) - set(self.without))

    @property
    def equal(self) -> bool:
        return self.without == self.with_plugin


def copy_code_bases(names: Sequence[str], destination: Path) -> list[Path]:
    """The named code bases copied under ``destination`` at their import paths; their files."""
    files: list[Path] = []
    for name in names:
        source = CODE_BASES[name]
        target = destination / source.relative_to(SITE)
        if not target.exists():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        files += sorted(target.rglob("*.py"))
    return files


def _config(directory: Path, plugin: bool) -> Path:
    config = directory / ("with.ini" if plugin else "without.ini")
    # allow_redefinition set on both sides: the plugin turns it on only where
    # the user has not decided (docs/checker.md), and a setting's flags win.
    lines = ["[mypy]", "ignore_missing_imports = True", "follow_imports = silent", "explicit_package_bases = True",
             "allow_redefinition = False",
             f"mypy_path = {REPO}"]
    if plugin:
        lines.append("plugins = spmd_mypy")
    config.write_text("\n".join(lines) + "\n")
    return config


def _report(root: Path, files: Sequence[Path], flags: Sequence[str], plugin: bool, cache: Path) -> tuple[str, ...]:
    command = [sys.executable, "-m", "mypy", *flags, "--config-file", str(_config(root, plugin)),
               "--cache-dir", str(cache), "--show-error-codes", "--no-error-summary", "--no-pretty",
               "--hide-error-context", *(str(f.relative_to(root)) for f in files)]
    env = {**os.environ, "MYPY_FORCE_COLOR": "0"}
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, env=env)
    if done.returncode not in (0, 1) or "Traceback (most recent call last)" in done.stderr or "INTERNAL ERROR" in done.stdout:
        raise RuntimeError(f"mypy did not complete (exit {done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    report = [line for line in done.stdout.splitlines() if _ERROR.match(line) and not _typed(root, line)]
    if plugin:
        report = [_HIDDEN_PARAMETER.sub(r"\1", line) for line in report]
    return tuple(sorted(report))


def _typed(root: Path, line: str) -> bool:
    """Whether the error ``line`` is in a module written for spmd_types (module docstring)."""
    return _written_for_spmd_types(root / line.split(":", 1)[0])


@functools.lru_cache(maxsize=None)
def _written_for_spmd_types(path: Path) -> bool:
    return _SPMD_TYPES_IMPORT.search(path.read_text(errors="replace")) is not None


def compare(root: Path, files: Sequence[Path], setting: str, cache: Path) -> Comparison:
    """One setting: mypy over ``files`` (under ``root``) without and with the plugin."""
    flags = SETTINGS[setting]
    start = time.perf_counter()
    without = _report(root, files, flags, False, cache / setting / "without")
    with_plugin = _report(root, files, flags, True, cache / setting / "with")
    lines = sum(len(f.read_text(errors="replace").splitlines()) for f in files)
    return Comparison(setting, len(files), lines, without, with_plugin, time.perf_counter() - start)
