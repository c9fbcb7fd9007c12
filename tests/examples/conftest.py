"""Shared fixtures of the example tests: one mypy run over every example file.

A cold mypy run over code that imports torch takes most of a minute on a
small machine, so the bug gallery, the GPT, mixture-of-experts, ring-attention,
MLP, global-mode and plan examples are checked together, once per session, by
``spmd-check`` in the examples' two configurations (sequence parallelism on and
off, examples/mypy.ini), with a cache shared between runs.
The shared names live in ``spmd_examples`` (a unique module name: spawned
gloo workers import the test modules, and ``conftest`` is ambiguous there).
"""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict

import pytest
from spmd_examples import (
    BUGS,
    ERROR_LINE,
    GLOBAL_EXAMPLE,
    GPT,
    MLP_EXAMPLE,
    MOE,
    MYPY_CONFIG,
    PLAN_EXAMPLE,
    RING_ATTENTION,
    ROOT,
    SOFTMAX_EXAMPLE,
    Diagnostic,
    MypyRun,
)


@pytest.fixture(scope="session")
def example_mypy_run() -> MypyRun:
    typed = [p for d in (BUGS, GPT, MOE, PLAN_EXAMPLE, RING_ATTENTION) for p in d.glob("*.py")]
    typed += [MLP_EXAMPLE, GLOBAL_EXAMPLE, SOFTMAX_EXAMPLE]
    files = sorted(str(p.relative_to(ROOT)) for p in typed)
    run = subprocess.run(
        [sys.executable, "-m", "spmd_mypy.configurations.cli", "--config-file", str(MYPY_CONFIG),
         "--cache-dir", str(ROOT / ".mypy_cache"),
         "--show-error-codes", "--no-error-summary", "--no-pretty", *files],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    if run.returncode not in (0, 1) or "INTERNAL ERROR" in run.stdout + run.stderr:
        pytest.fail(f"mypy with the spmd_mypy plugin did not complete:\n{run.stdout}{run.stderr}")
    errors: dict[str, list[Diagnostic]] = defaultdict(list)
    for line in run.stdout.splitlines():
        match = ERROR_LINE.match(line)
        if match:
            errors[match["path"]].append(
                Diagnostic(int(match["line"]), match["code"] or "", match["message"], match["label"] or ""))
    return MypyRun(dict(errors), run.stdout + run.stderr, run.returncode, tuple(files))
