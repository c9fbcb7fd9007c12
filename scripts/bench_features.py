"""Benchmark: what this round's checker features cost on generated code, each against a plain run.

The code is ``scripts/bench_checker.py``'s generated package of typed
tensor-parallel blocks (about 10k lines by default), and a variant of it
whose parameters enter through typed autograd Functions (Megatron's
``_CopyToModelParallelRegion`` shape: ``EnterDp_k.apply(w)``, a forward and a
backward the plugin checks against each other) instead of plain functions.
Every run is the package's first check, against a copy of a cache that
already holds torch and ``spmd_stubs`` (the "new code" of bench_checker:
the cost of the code base itself); each side is the median of ``--repeat``
runs, the runs of a row alternated.

Rows, each ``feature run / plain run`` where the plain run is plain mypy (no
plugin) on the same code with every SPMD annotation erased to
``torch.Tensor``:

* the package checked by mypy with the plugin;
* the autograd-Function variant checked by mypy with the plugin (the
  ``.apply`` and forward/backward hooks);
* ``spmd-coverage`` on the package (a strict check plus the report);
* ``spmd-check`` on the package with two configurations declared.

    python scripts/bench_features.py [--lines 10000] [--repeat 5]

Ratios are printed; nothing is asserted.
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
from bench_checker import _checked, count_lines, erase, fill_deps_cache, generate, timed, write_config

_ENTER_DP = re.compile(
    r'^def enter_dp_(\d+)\(p: Tensor\[I@dp\]\) -> Tensor\[R@dp\]:\n    """.*"""\n    return .*\n', re.M)
_FUNCTION = '''class EnterDp_{k}(torch.autograd.Function):
    """A dp-invariant parameter entering per-rank compute; its gradient all-reduced over dp."""

    @staticmethod
    def forward(ctx: Any, p: Tensor[I@dp]) -> Tensor[R@dp]:
        return spmd.convert(p, dp, src=I, dst=R)

    @staticmethod
    def backward(ctx: Any, grad: Tensor[P@dp]) -> Tensor[I@dp]:
        return spmd.all_reduce(grad, dp, src=P, dst=I)
'''
CONFIGURATIONS = "[spmd_mypy]\nconfigurations =\n    sp: sequence_parallel = true\n    no_sp: sequence_parallel = false\n"


def with_autograd_functions(package: Path) -> int:
    """Each ``enter_dp_k`` becomes a typed autograd Function, called by ``.apply``; how many."""
    made = 0
    for module in package.glob("mod_*.py"):
        text, count = _ENTER_DP.subn(lambda m: _FUNCTION.format(k=m[1]), module.read_text())
        text = re.sub(r"\benter_dp_(\d+)\(", r"EnterDp_\1.apply(", text)
        module.write_text("from typing import Any\n" + text)
        made += count
    return made


class Workspace:
    """A package variant in its own folder, and the commands that check it against fresh cache copies."""

    def __init__(self, root: Path, config: Path, base_cache: Path) -> None:
        self.root, self.config, self.base_cache = root, config, base_cache

    def seconds(self, tool: list[str], what: str) -> float:
        cache = self.root / "cache"
        shutil.rmtree(cache, ignore_errors=True)
        shutil.copytree(self.base_cache, cache)
        command = [sys.executable, "-m", *tool, "--config-file", str(self.config), "--cache-dir", str(cache)]
        seconds, proc = timed([*command, str(self.root / "benchpkg")], self.root)
        _checked(proc, what)
        return seconds


def workspace(root: Path, lines: int, typed: bool, functions: bool, config_text: str = "") -> Workspace:
    """The package (typed or erased, with autograd Functions or not) and a cache holding its imports."""
    root.mkdir(parents=True)
    config = write_config(root, plugin=typed)
    config.write_text(config.read_text() + config_text)
    base_cache = fill_deps_cache(root, config, typed, f"the cache warm-up of {root.name}")
    modules = generate(root, lines, typed=True)
    if functions and not with_autograd_functions(root / "benchpkg"):
        raise SystemExit("no enter_dp_k function to turn into an autograd Function: the generator changed")
    if not typed:
        for module in modules:
            module.write_text(erase(module.read_text()))
    return Workspace(root, config, base_cache)


def alternated(repeat: int, runs: dict[str, tuple[Workspace, list[str]]]) -> dict[str, float]:
    """The median seconds of each named run, the runs interleaved round by round."""
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, (space, tool) in runs.items():
            samples[name].append(space.seconds(tool, name))
    return {name: statistics.median(times) for name, times in samples.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    mypy, coverage, check = ["mypy"], ["spmd_mypy.coverage"], ["spmd_mypy.configurations.cli"]
    with tempfile.TemporaryDirectory(prefix="spmd_bench_features_") as tmp:
        root = Path(tmp)
        typed = workspace(root / "typed", args.lines, typed=True, functions=False)
        erased = workspace(root / "erased", args.lines, typed=False, functions=False)
        functions = workspace(root / "functions", args.lines, typed=True, functions=True)
        functions_erased = workspace(root / "functions_erased", args.lines, typed=False, functions=True)
        configured = workspace(root / "configured", args.lines, typed=True, functions=False,
                               config_text=CONFIGURATIONS)
        lines = count_lines(sorted((root / "typed" / "benchpkg").glob("*.py")))
        modules = len(list((root / "typed" / "benchpkg").glob("mod_*.py")))
        times = alternated(args.repeat, {
            "plain": (erased, mypy), "plugin": (typed, mypy),
            "functions plain": (functions_erased, mypy), "functions plugin": (functions, mypy),
            "coverage": (typed, coverage), "two configurations": (configured, check),
        })
    rows = [
        ("mypy + plugin", "plugin", "plain"),
        ("autograd Functions, mypy + plugin", "functions plugin", "functions plain"),
        ("spmd-coverage (strict check + report)", "coverage", "plain"),
        ("spmd-check, 2 configurations", "two configurations", "plain"),
    ]
    print(f"{lines} lines of generated typed code in {modules} modules; new code, median of {args.repeat}")
    print(f"{'feature':<40} {'feature s':>9} {'plain s':>8} {'ratio':>6}")
    for what, feature, plain in rows:
        print(f"{what:<40} {times[feature]:9.2f} {times[plain]:8.2f} {times[feature] / times[plain]:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
