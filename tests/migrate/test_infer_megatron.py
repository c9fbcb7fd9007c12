"""``spmd-migrate --infer`` on megatron-core's ``tensor_parallel``, as installed, in two configurations.

A copy of the package (never the installed one) gets the shipped overlay and
the codemod (``--overlay megatron-core``), then the inference, checked in
``sp`` and ``no_sp`` (``sequence_parallel`` on and off) with a warm cache.
It must not stop, and what it writes must add no diagnostic to those the
code had (docs/migrate.md gives the numbers for ``tensor_parallel`` and
``transformer`` together).
"""

from __future__ import annotations

import fcntl
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

import pytest

from spmd_mypy.migrate.cli import main
from spmd_mypy.migrate.infer import Inference, infer
from spmd_mypy.migrate.infer_rules import Target
from spmd_mypy.migrate.overlay import SpmdType
from spmd_mypy.migrate.thirdparty import installed_dir
from spmd_mypy.typed_run import Diagnostic

ROOT = Path(__file__).resolve().parents[2]

try:
    INSTALLED = installed_dir("megatron") / "core" / "tensor_parallel"
except ModuleNotFoundError:
    pytest.skip("megatron-core is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def inferred(kept_dir: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inference]:
    root = tmp_path_factory.mktemp("megatron")
    package = root / "megatron" / "core" / "tensor_parallel"
    shutil.copytree(INSTALLED, package, ignore=shutil.ignore_patterns("__pycache__"))
    assert main(["--in-place", "--quiet", "-j", "1", "--overlay", "megatron-core", "--root", str(root),
                 str(package)]) == 0
    config = root / "mypy.ini"
    recommended = (ROOT / "spmd_mypy" / "recommended.ini").read_text()
    config.write_text(recommended.replace("[mypy]\n", f"[mypy]\nmypy_path = {root}\nexplicit_package_bases = True\n"
                                          "ignore_missing_imports = True\n", 1)
                      + "\n[spmd_mypy]\nconfigurations =\n    sp: sequence_parallel = true\n"
                      "    no_sp: sequence_parallel = false\n")
    cache = kept_dir("spmd_infer")
    with open(cache / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield infer([package], config, cache / "mypy")


def _errors(diagnostics: list[Diagnostic]) -> Counter[tuple[str, str | None, str]]:
    return Counter((Path(d.path).name, d.code, d.message) for d in diagnostics if d.severity == "error")


def test_what_is_written_adds_no_diagnostic(inferred: Inference) -> None:
    assert _errors(inferred.before)  # the code has errors of its own: they are not the inference's
    assert _errors(inferred.diagnostics) - _errors(inferred.before) == Counter()


def test_the_row_parallel_weight_is_inferred(inferred: Inference) -> None:
    """``_forward_impl(self, input, weight, ...)`` is passed ``self.weight``, this rank's columns (``S(1)@tp``)."""
    print(f"\n{len(inferred.written)} inferred, {len(inferred.todos)} TODOs, {inferred.runs} mypy runs")
    written = {p.target: p.annotation for p in inferred.written}
    weight = Target("megatron.core.tensor_parallel.layers", "RowParallelLinear._forward_impl", "weight")
    assert written.get(weight) == SpmdType.parse("S(1)@tp", "")
