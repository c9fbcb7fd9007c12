"""Paths and mypy-output types shared by the example tests."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BUGS = EXAMPLES / "bugs"
GPT = EXAMPLES / "gpt"
MOE = EXAMPLES / "moe"
RING_ATTENTION = EXAMPLES / "ring_attention"
MLP_EXAMPLE = EXAMPLES / "train_mlp.py"
GLOBAL_EXAMPLE = EXAMPLES / "global_mlp.py"
SOFTMAX_EXAMPLE = EXAMPLES / "vocab_parallel_softmax.py"
PLAN_EXAMPLE = EXAMPLES / "dtensor_plan"
"""A llama block and its torch ``parallelize_module`` plan: plain torch code, no SPMD types."""
MYPY_CONFIG = EXAMPLES / "mypy.ini"
"""The examples' config: the recommended one, plus the GPT's two configurations (sequence parallelism on, off)."""
ERROR_LINE = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+): error: (?:\[(?P<label>[\w, -]+)\] )?(?P<message>.*?)"
                        r"(?:  \[(?P<code>[a-z0-9-]+)\])?$")


class Diagnostic(NamedTuple):
    line: int
    code: str
    message: str
    configurations: str = ""  # where spmd-check found it, "" for every configuration


class MypyRun(NamedTuple):
    """mypy's errors per file (paths relative to the repo root), its raw output, and the files it checked."""

    errors: dict[str, list[Diagnostic]]
    output: str
    returncode: int
    files: tuple[str, ...] = ()

    def clean(self, path: str) -> bool:
        """``path`` was checked and got no error."""
        return path in self.files and not self.errors.get(path)


def _script(name: str) -> ModuleType:
    """A module of ``scripts/`` (a directory of files run as programs, not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_gallery = _script("check_gallery")
"""``scripts/check_gallery.py``: the main command's bug-by-bug check of the gallery (the tests read its ``# E:``)."""
