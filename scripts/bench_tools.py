"""Benchmark: the coverage report and annotation inference next to one checker run, on generated code.

The code is ``scripts/bench_checker.py``'s generated package of typed
tensor-parallel blocks (about 10k lines by default).  Measured side by side,
each a fresh process, with torch and ``spmd_stubs`` already in the cache:

* ``mypy``: one checker run over the package (median of ``--repeat``), the
  first with the package not yet cached (``new code``), then warm;
* ``mypy`` in strict mode (``spmd-untyped-boundary`` checks every call,
  return and assignment): the package's first check under the strict config;
* ``spmd-coverage``: the report over the same package (its checked files are
  always checked again, their imports from the cache);
* ``spmd-migrate --infer``: inference over a copy whose helpers
  (``column_k``, ``row_k``) lost their return annotations, until nothing
  changes (it prints the diff; nothing is written).

    python scripts/bench_tools.py [--lines 10000] [--repeat 3]

Ratios to the warm checker run are printed; nothing is asserted.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_checker import count_lines, generate, timed, write_config

_HELPER_RETURN = re.compile(r"^(def (?:column|row)_\d+\(.*\)) -> Tensor\[[^\]]*\]:$", re.M)


def strip_helper_returns(package: Path) -> int:
    """Remove the return annotations of the column/row helpers; how many were removed."""
    removed = 0
    for module in package.glob("mod_*.py"):
        text, count = _HELPER_RETURN.subn(r"\1:", module.read_text())
        module.write_text(text)
        removed += count
    return removed


def run(command: list[str], root: Path, what: str) -> float:
    return run_and_say(command, root, what)[0]


def run_and_say(command: list[str], root: Path, what: str) -> tuple[float, str]:
    """The run's seconds and what it wrote to stderr; a failing run stops the benchmark."""
    seconds, proc = timed(command, root)
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return seconds, proc.stderr


def median_of(repeat: int, command: list[str], root: Path, what: str) -> float:
    return statistics.median(run(command, root, what) for _ in range(repeat))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="spmd_bench_tools_") as tmp:
        root = Path(tmp)
        lines = count_lines(generate(root, args.lines, typed=True))
        config = write_config(root, plugin=True)
        cache = root / ".mypy_cache"
        python = sys.executable
        mypy = [python, "-m", "mypy", "--config-file", str(config), "--cache-dir", str(cache)]
        # torch and spmd_stubs into the cache first: a one-module package, then the real one is new code
        (root / "warmup.py").write_text("import torch\nimport spmd_stubs\n")
        run([*mypy, "warmup.py"], root, "the cache warm-up")
        new_code = run([*mypy, "-p", "benchpkg"], root, "mypy (new code)")
        warm = median_of(args.repeat, [*mypy, "-p", "benchpkg"], root, "mypy (warm)")
        strict_config = root / "strict.ini"
        strict_config.write_text(config.read_text() + "[spmd_mypy]\nstrict = true\n")
        strict_cmd = [python, "-m", "mypy", "--config-file", str(strict_config), "--cache-dir", str(cache)]
        strict = run([*strict_cmd, "-p", "benchpkg"], root, "mypy, strict (new code)")
        coverage_cmd = [python, "-m", "spmd_mypy.coverage", "--config-file", str(config), "--cache-dir", str(cache),
                        str(root / "benchpkg")]
        coverage = median_of(args.repeat, coverage_cmd, root, "spmd-coverage")
        stripped = root / "stripped"
        shutil.copytree(root / "benchpkg", stripped / "benchpkg")
        removed = strip_helper_returns(stripped / "benchpkg")
        infer_cmd = [python, "-m", "spmd_mypy.migrate", "--infer", "--quiet", "--config-file", str(config),
                     "--cache-dir", str(cache), str(stripped / "benchpkg")]
        inference, said = run_and_say(infer_cmd, stripped, "spmd-migrate --infer")
    print(f"{lines} lines of generated typed code; {removed} helper return annotations removed for the inference")
    print(said.strip().splitlines()[-1])
    print(f"{'run':<34} {'seconds':>8} {'x warm mypy':>12}")
    for what, seconds in (("mypy, the package new to the cache", new_code), ("mypy, warm", warm),
                          ("mypy strict, the package new to it", strict),
                          ("spmd-coverage (strict run + report)", coverage), ("spmd-migrate --infer (to fixpoint)",
                                                                               inference)):
        print(f"{what:<34} {seconds:8.2f} {seconds / warm:12.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
