"""Benchmark: mypy with the spmd plugin vs plain mypy, on generated code bases.

For each size (about 1k, 10k and 50k lines) a package of typed
tensor-parallel blocks is generated twice: typed (``Tensor[R@tp, S(1)@dp]``
annotations, checked with the plugin) and erased (the same code with every
SPMD annotation written ``torch.Tensor``, checked by plain mypy: the code
base before it adopted types). Both check clean. Measured side by side:

* cold: an empty cache (mypy also analyses torch: that dominates);
* warm: the same command again, nothing changed (median of 3);
* new code: the package's first check with everything it imports already
  cached (torch, ``spmd_stubs``: a one-module package checked first, its
  cache copied for each run; median of 3), i.e. the cost of the code base
  itself, which cold hides under torch's;
* dmypy: a daemon's first check, then a recheck after a one-line edit in one
  module's function body (median of 3 edits).

    python scripts/bench_checker.py [--sizes 1000 10000 50000] [--repeat 3]
    python scripts/bench_checker.py --new-code-only [--sizes 10000 50000] [--repeat 5]

``--new-code-only`` measures the new-code column alone: both packages are
generated and their dependency caches filled once, then the typed and the
erased check alternate, each run with a fresh copy of its cache, so both
sides see the same load; it prints the median wall and CPU (user + system)
seconds of each side and their ratios.

    python scripts/bench_checker.py --breakdown [--sizes 10000 50000] [--repeat 5]

``--breakdown`` runs the same alternating new-code checks each in one
process (``scripts/hook_timer.py``) and splits the typed check's CPU
seconds (medians): plain mypy's on the erased code, the plugin's hooks
(timed at their outermost call, what mypy does inside a hook included),
and the rest: mypy's own extra work on typed code, the hook lookups, the
timing's own cost.  ``no hooks`` is (typed - hooks) / plain, the ratio that
hooks costing nothing would leave; the plugin's import (done before the
run) is apart.  Then the last typed run's hooks by kind.

Ratios are printed; nothing is asserted (timings are not tests).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

REPO = Path(__file__).resolve().parents[1]
PLUGIN = "spmd_mypy"
_R = TypeVar("_R")
BLOCKS_PER_MODULE = 3

HEADER = '''"""Generated tensor-parallel blocks ({index})."""

import torch
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import dp, tp
{imports}
'''

# One group of functions: column- and row-parallel linears and a block with
# a residual, in the SP-off type cycle (docs/spec.md#loss-rule). About 35 lines.
BLOCK = '''

def enter_dp_{k}(p: Tensor[I@dp]) -> Tensor[R@dp]:
    """A dp-invariant parameter entering per-rank compute."""
    return spmd.convert(p, dp, src=I, dst=R)


def column_{k}(x: Tensor[R@tp, S(1)@dp], w: Tensor[S(0)@tp, I@dp], b: Tensor[S(0)@tp, I@dp]) -> Tensor[V@tp, S(1)@dp]:
    """Column-parallel linear: R in, V (hidden shard) out."""
    return F.gelu(x @ enter_dp_{k}(w).T + enter_dp_{k}(b))


def row_{k}(a: Tensor[V@tp, S(1)@dp], w: Tensor[S(1)@tp, I@dp]) -> Tensor[I@tp, S(1)@dp]:
    """Row-parallel linear: the local product is a part of the sum."""
    y = a @ enter_dp_{k}(w).T
    return spmd.all_reduce(y, tp, src=V, dst=I)


def block_{k}(
    x: Tensor[I@tp, S(1)@dp],
    w1: Tensor[S(0)@tp, I@dp],
    b1: Tensor[S(0)@tp, I@dp],
    w2: Tensor[S(1)@tp, I@dp],
) -> Tensor[I@tp, S(1)@dp]:
    """One MLP block with a residual connection."""
    h = spmd.convert(x, tp, src=I, dst=R)
    scale = {scale}
    y = row_{k}(column_{k}(h, w1, b1), w2) * scale
    return {residual}
'''

TYPED_LOSS = '''

def loss_{k}(y: Tensor[I@tp, S(1)@dp]) -> Tensor[I@tp, P@dp]:
    """The per-rank loss of a dp shard: a part of the global loss."""
    return spmd.reinterpret((y**2).sum(), dp, src=V, dst=P)
'''


def _block(k: int, previous: str | None) -> str:
    """A block; it calls the previous module's block (a dependency chain) when there is one."""
    residual = f"{previous}(y, w1, b1, w2) + x" if previous else "y + x"
    return BLOCK.format(k=k, scale="0.5", residual=residual)


def erase(source: str) -> str:
    """The same code without SPMD types: every ``Tensor[...]`` annotation is ``torch.Tensor``."""
    out, i = [], 0
    while (start := source.find("Tensor[", i)) != -1:
        end, depth = start + len("Tensor["), 1
        while depth:
            depth += {"[": 1, "]": -1}.get(source[end], 0)
            end += 1
        out.append(source[i:start] + "torch.Tensor")
        i = end
    return "".join(out) + source[i:]


def generate(root: Path, lines: int, typed: bool) -> list[Path]:
    """A package ``benchpkg`` of about ``lines`` lines; returns its module paths."""
    package = root / "benchpkg"
    shutil.rmtree(package, ignore_errors=True)
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    modules: list[Path] = []
    total = 0
    while total < lines:
        index = len(modules)
        imports = f"\nfrom benchpkg.mod_{index - 1:04d} import block_0 as previous_block\n" if index else ""
        parts = [HEADER.format(index=index, imports=imports)]
        parts += [_block(k, "previous_block" if index and k == 0 else None) for k in range(BLOCKS_PER_MODULE)]
        parts.append(TYPED_LOSS.format(k=0))
        source = "".join(parts)
        path = package / f"mod_{index:04d}.py"
        path.write_text(source if typed else erase(source))
        modules.append(path)
        total += source.count("\n")
    return modules


def count_lines(paths: list[Path]) -> int:
    return sum(p.read_text().count("\n") for p in paths)


# --------------------------------------------------------------------------
# Timed runs
# --------------------------------------------------------------------------


def write_config(root: Path, plugin: bool) -> Path:
    config = root / "mypy.ini"
    lines = ["[mypy]", "python_version = 3.11"]
    if plugin:
        lines.append(f"plugins = {PLUGIN}")
    config.write_text("\n".join(lines) + "\n")
    return config


def _env(root: Path) -> dict[str, str]:
    """The runs' environment: the package and this checkout on the path (mypy's too).

    The plugin is imported from bytecode, as an installed package is: the
    runs get a bytecode cache of their own under ``root`` even where the
    caller turns bytecode writing off (else every run compiles the plugin's
    sources, about 40 ms that mypy, compiled, never pays).
    """
    env = {
        **os.environ,
        "PYTHONPATH": f"{root}{os.pathsep}{REPO}",
        "MYPYPATH": str(REPO),
        "PYTHONPYCACHEPREFIX": str(root / "pycache"),
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def timed(cmd: list[str], root: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, env=_env(root), capture_output=True, text=True)
    return time.perf_counter() - start, proc


def _checked(proc: subprocess.CompletedProcess[str], what: str) -> None:
    """A benchmark of a failing check would measure the wrong thing."""
    if proc.returncode != 0:
        raise SystemExit(f"{what} did not check clean:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")


def mypy_args(config: Path, cache: Path) -> list[str]:
    """mypy's arguments for checking the package."""
    return ["--config-file", str(config), "--cache-dir", str(cache), "-p", "benchpkg"]


def mypy_cmd(config: Path, cache: Path) -> list[str]:
    return [sys.executable, "-m", "mypy", *mypy_args(config, cache)]


@dataclass
class Timings:
    cold: float
    warm: float
    new_code: float
    dmypy_first: float
    dmypy_recheck: float


def measure(root: Path, plugin: bool, repeat: int, lines: int) -> Timings:
    """Cold, warm and new-code mypy runs, then a daemon's first check and rechecks after edits."""
    config = write_config(root, plugin)
    cache = root / ".mypy_cache"
    shutil.rmtree(cache, ignore_errors=True)
    what = "typed code with the plugin" if plugin else "erased code, plain mypy"
    cold, proc = timed(mypy_cmd(config, cache), root)
    _checked(proc, what)
    warm = statistics.median(timed(mypy_cmd(config, cache), root)[0] for _ in range(repeat))
    new_code = measure_new_code(root, config, lines, plugin, what, repeat)
    first, recheck = measure_dmypy(root, config, repeat, what)
    return Timings(cold, warm, new_code, first, recheck)


def measure_new_code(root: Path, config: Path, lines: int, plugin: bool, what: str, repeat: int) -> float:
    """The whole package checked against a cache that already holds everything it imports (median of ``repeat``).

    A one-module package (the first module of the full one, same imports)
    fills a cache; each run checks the full package with a fresh copy of
    it.  Leaves the full package in place.
    """
    deps = fill_deps_cache(root, config, plugin, what)
    generate(root, lines, typed=plugin)
    runs = []
    for _ in range(repeat):
        cache = root / ".mypy_cache_new"
        shutil.rmtree(cache, ignore_errors=True)
        shutil.copytree(deps, cache)
        seconds, proc = timed(mypy_cmd(config, cache), root)
        _checked(proc, what)
        runs.append(seconds)
    return statistics.median(runs)


def fill_deps_cache(root: Path, config: Path, plugin: bool, what: str) -> Path:
    """A cache holding everything the package imports (torch, ``spmd_stubs``): a one-module package checked."""
    deps = root / ".mypy_cache_deps"
    shutil.rmtree(deps, ignore_errors=True)
    generate(root, 1, typed=plugin)
    _checked(timed(mypy_cmd(config, deps), root)[1], what)
    return deps


def timed_cpu(cmd: list[str], root: Path) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Wall and CPU (user + system) seconds of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, proc = timed(cmd, root)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc


@dataclass
class Side:
    """One side of a side-by-side run: its package, config and dependency cache."""

    plugin: bool
    root: Path
    config: Path
    deps: Path
    what: str
    lines: int


def prepare_sides(tmp: Path, size: int) -> dict[bool, Side]:
    """The typed (True) and erased (False) packages of ``size`` lines, each with its dependency cache filled."""
    sides = {}
    for plugin in (True, False):
        root = tmp / ("typed" if plugin else "erased")
        root.mkdir()
        config = write_config(root, plugin)
        what = "typed code with the plugin" if plugin else "erased code, plain mypy"
        deps = fill_deps_cache(root, config, plugin, what)
        sides[plugin] = Side(plugin, root, config, deps, what, count_lines(generate(root, size, typed=plugin)))
    return sides


def alternate(sides: dict[bool, Side], repeat: int, run: Callable[[Side, Path], _R]) -> dict[bool, list[_R]]:
    """``run(side, cache)`` ``repeat`` times a side, the order flipping every round, each on a fresh copy of the side's cache."""
    runs: dict[bool, list[_R]] = {True: [], False: []}
    for n in range(repeat):
        for plugin in ((True, False) if n % 2 == 0 else (False, True)):
            side = sides[plugin]
            cache = side.root / ".mypy_cache_new"
            shutil.rmtree(cache, ignore_errors=True)
            shutil.copytree(side.deps, cache)
            runs[plugin].append(run(side, cache))
    return runs


def _new_code_run(side: Side, cache: Path) -> tuple[float, float]:
    wall, cpu, proc = timed_cpu(mypy_cmd(side.config, cache), side.root)
    _checked(proc, side.what)
    return wall, cpu


def new_code_only(size: int, repeat: int) -> None:
    """The new-code column alone, the typed and the erased check alternating (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="spmd_bench_") as tmp:
        sides = prepare_sides(Path(tmp), size)
        runs = alternate(sides, repeat, _new_code_run)
        medians = {}
        for plugin in (True, False):
            wall = statistics.median(w for w, _ in runs[plugin])
            cpu = statistics.median(c for _, c in runs[plugin])
            medians[plugin] = (wall, cpu)
            mode = "typed + plugin" if plugin else "erased, plain mypy"
            each = " ".join(f"{w:.2f}" for w, _ in runs[plugin])
            print(f"{sides[plugin].lines:>7} {mode:<22} {wall:8.2f} {cpu:8.2f}   runs: {each}")
        (wall_a, cpu_a), (wall_b, cpu_b) = medians[True], medians[False]
        print(f"{'':>7} {'ratio plugin/plain':<22} {wall_a / wall_b:8.2f} {cpu_a / cpu_b:8.2f}", flush=True)


def _hook_times(side: Side, cache: Path) -> dict[str, Any]:
    """One new-code check in one process (``scripts/hook_timer.py``): its CPU, the hooks' share."""
    plugin = ["--plugin"] if side.plugin else []
    cmd = [sys.executable, str(Path(__file__).with_name("hook_timer.py")), *plugin, *mypy_args(side.config, cache)]
    _, proc = timed(cmd, side.root)
    _checked(proc, side.what)
    return json.loads(proc.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def breakdown(size: int, repeat: int) -> None:
    """Where the typed check's extra CPU goes: the hooks, and the rest (see ``--breakdown``)."""
    with tempfile.TemporaryDirectory(prefix="spmd_bench_") as tmp:
        sides = prepare_sides(Path(tmp), size)
        runs = alternate(sides, repeat, _hook_times)
    plain = statistics.median(r["total"] for r in runs[False])
    typed = statistics.median(r["total"] for r in runs[True])
    hooks = statistics.median(sum(s for _, s in r["hooks"].values()) for r in runs[True])
    imported = statistics.median(r["import"] for r in runs[True])
    rest = typed - hooks - plain
    print(
        f"{sides[True].lines:>7} {plain:8.2f} {typed:8.2f} {hooks:8.2f} {rest:8.2f} "
        f"{typed / plain:8.2f} {(typed - hooks) / plain:10.2f} {imported:8.3f}"
    )
    last = runs[True][-1]["hooks"]
    for kind, (calls, seconds) in sorted(last.items(), key=lambda item: -item[1][1]):
        print(f"{'':>7}   {kind:<32} {calls:>7} calls {seconds:6.3f} s {1e6 * seconds / calls:6.1f} us a call")


def measure_dmypy(root: Path, config: Path, repeat: int, what: str) -> tuple[float, float]:
    status = root / ".dmypy.json"
    dmypy = [sys.executable, "-m", "mypy.dmypy", "--status-file", str(status)]
    subprocess.run([*dmypy, "start", "--", "--config-file", str(config)], cwd=root, env=_env(root), check=True, capture_output=True)
    try:
        first, proc = timed([*dmypy, "check", "benchpkg"], root)
        _checked(proc, what)
        modules = sorted((root / "benchpkg").glob("mod_*.py"))
        target = modules[len(modules) // 2]
        rechecks = []
        for n in range(repeat):
            # A one-line edit in a function body: the interface stays the same.
            target.write_text(re.sub(r"scale = 0\.\d+", f"scale = 0.{n + 6}", target.read_text(), count=1))
            seconds, proc = timed([*dmypy, "check", "benchpkg"], root)
            _checked(proc, what)
            rechecks.append(seconds)
        return first, statistics.median(rechecks)
    finally:
        subprocess.run([*dmypy, "stop"], cwd=root, env=_env(root), capture_output=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 50000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--new-code-only", action="store_true", help="only the new-code column, sides alternating")
    parser.add_argument("--breakdown", action="store_true", help="the new-code check's CPU split: hooks and the rest")
    args = parser.parse_args(argv)
    if args.breakdown:
        print(f"{'lines':>7} {'plain s':>8} {'typed s':>8} {'hooks s':>8} {'rest s':>8} {'ratio':>8} "
              f"{'no hooks':>10} {'import s':>8}", flush=True)
        for size in args.sizes:
            breakdown(size, args.repeat)
        return 0
    if args.new_code_only:
        print(f"{'lines':>7} {'mode':<22} {'new code s':>8} {'CPU s':>8}", flush=True)
        for size in args.sizes:
            new_code_only(size, args.repeat)
        return 0
    print(f"{'lines':>7} {'mode':<22} {'cold s':>8} {'warm s':>8} {'new code s':>11} {'dmypy 1st':>10} {'recheck s':>10}")
    for size in args.sizes:
        results = {}
        for plugin in (True, False):
            with tempfile.TemporaryDirectory(prefix="spmd_bench_") as tmp:
                root = Path(tmp)
                lines = count_lines(generate(root, size, typed=plugin))
                results[plugin] = measure(root, plugin, args.repeat, size)
            t = results[plugin]
            mode = "typed + plugin" if plugin else "erased, plain mypy"
            print(
                f"{lines:>7} {mode:<22} {t.cold:8.2f} {t.warm:8.2f} {t.new_code:11.2f} {t.dmypy_first:10.2f} "
                f"{t.dmypy_recheck:10.3f}"
            )
        a, b = results[True], results[False]
        print(
            f"{'':>7} {'ratio plugin/plain':<22} {a.cold / b.cold:8.2f} {a.warm / b.warm:8.2f} {a.new_code / b.new_code:11.2f} "
            f"{a.dmypy_first / b.dmypy_first:10.2f} {a.dmypy_recheck / b.dmypy_recheck:10.2f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
