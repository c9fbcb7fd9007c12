"""Benchmark: mypy with the spmd plugin vs plain mypy, on real code.

The config is the one users are told to start from,
``spmd_mypy/recommended.ini``, with its ``plugins`` line (the plugin side)
and without it (the plain side), plus what checking a copied package needs:
``explicit_package_bases`` (megatron is a namespace package) and
``ignore_missing_imports`` (apex, transformer_engine are not installed).
Workloads:

* untyped: megatron-core's ``tensor_parallel`` + ``transformer``,
  fairscale's ``nn.model_parallel``, torchtitan's ``models`` +
  ``distributed``, nanotron's ``parallel``: each whole installed package
  copied with its structure and modification times
  (``spmd_mypy.migrate.thirdparty.copy_installed``), both sides checking
  the same copy: the cost of turning the plugin on for a repository that
  has no SPMD types yet;
* typed: ``examples/gpt`` and ``examples/moe``, checked with the plugin,
  against the same files with every SPMD annotation erased to
  ``torch.Tensor`` (``bench_checker.erase``) checked by plain mypy: the
  code before it adopted types.

Phases, each a side's CPU seconds (user + system of the mypy process):

* cold: an empty cache (mypy also analyses torch: that dominates); one run
  a side (it fills the warm cache), the pair's order flipping between
  workloads;
* warm: the same command again, nothing changed;
* new code: the workload's first check against a cache that holds
  everything it imports (torch, the rest of its package): a copy of the
  warm cache, keeping its files' modification times, with the checked
  modules' own entries deleted.

Warm and new code are ``--repeats`` pairs, alternated (the order flipping
every pair); the table gives medians and the range of the pairs' ratios.
Before any workload each side checks a probe file whose SPMD error only
the plugin reports: a plugin side that does not report it (the plugin not
loaded), or a plain side that does, stops the script with an error.

    python scripts/bench_real_code.py [--workloads megatron-core gpt ...] [--repeats 3] [--breakdown]

``--breakdown`` adds, for each workload, one more new-code pair, each run
in one process timed the way ``scripts/hook_timer.py`` times it, and prints
the plugin side's CPU beyond plain mypy's split into the plugin's import,
its hooks (the costliest kinds) and the rest (mypy's own extra work).

Ratios are printed; nothing is asserted (timings are not tests).
"""

from __future__ import annotations

import argparse
import configparser
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_checker import REPO, _env, count_lines, erase, timed_cpu

sys.path.insert(0, str(REPO))
from spmd_mypy.migrate.thirdparty import RECOMMENDED_CONFIG, copy_installed, installed_dir

_R = TypeVar("_R")

PROBE = '''"""Plugin probe: an all-reduce from I to I, which exists on no axis."""

import spmd_stubs as spmd
from spmd_stubs import I
from spmd_stubs.axes import tp


def reduce_invariant(x: object) -> object:
    return spmd.all_reduce(x, tp, src=I, dst=I)
'''
PROBE_ERROR = "[spmd-collective]"
"""What the plugin reports on the probe, and plain mypy does not."""


@dataclass(frozen=True)
class Workload:
    """Modules checked as new code: ``targets`` of the copied installed ``packages``, or an ``examples/`` folder."""

    name: str
    targets: tuple[str, ...]
    packages: tuple[str, ...] = ()
    example: str = ""

    @property
    def typed(self) -> bool:
        return bool(self.example)

    def sources(self) -> list[Path]:
        """The checked modules' files, where they are installed (or in the repository)."""
        if self.typed:
            return sorted((REPO / "examples" / self.example).glob("*.py"))
        root = installed_dir(self.packages[0]).parent
        files: list[Path] = []
        for target in self.targets:
            files += sorted((root / target.replace(".", "/")).rglob("*.py"))
        return files


WORKLOADS = {
    w.name: w
    for w in [
        Workload("megatron-core", ("megatron.core.tensor_parallel", "megatron.core.transformer"), ("megatron",)),
        Workload("fairscale", ("fairscale.nn.model_parallel",), ("fairscale",)),
        Workload("torchtitan", ("torchtitan.models", "torchtitan.distributed"), ("torchtitan",)),
        Workload("nanotron", ("nanotron.parallel",), ("nanotron",)),
        Workload("gpt", ("tp_gpt", "gpt_reference", "train", "gloo_launch"), example="gpt"),
        Workload("moe", ("ep_moe", "moe_reference", "train_moe"), example="moe"),
    ]
}


def write_config(root: Path, plugin: bool) -> Path:
    """The recommended config, with or without its ``plugins`` line, for a copied package under ``root``."""
    config = configparser.ConfigParser()
    config.read_string(RECOMMENDED_CONFIG.read_text())
    if not plugin:
        del config["mypy"]["plugins"]
    config["mypy"].update({"explicit_package_bases": "True", "ignore_missing_imports": "True"})
    path = root / "mypy.ini"
    with path.open("w") as out:
        config.write(out)
    return path


@dataclass
class Side:
    """One side of a workload: its copy of the code, its config, its warm cache."""

    plugin: bool
    root: Path
    config: Path

    @property
    def name(self) -> str:
        return "mypy + plugin" if self.plugin else "plain mypy"

    def mypy_args(self, cache: Path, targets: tuple[str, ...]) -> list[str]:
        flags = [flag for target in targets for flag in (("-m", target) if "." not in target else ("-p", target))]
        return ["--config-file", str(self.config), "--cache-dir", str(cache), *flags]

    def check(self, cache: Path, targets: tuple[str, ...]) -> float:
        """CPU seconds of one mypy run; a crash or a config error stops the benchmark."""
        _, cpu, proc = timed_cpu([sys.executable, "-m", "mypy", *self.mypy_args(cache, targets)], self.root)
        output = proc.stdout + proc.stderr
        if proc.returncode not in (0, 1) or "INTERNAL ERROR" in output or "Traceback" in output:
            raise SystemExit(f"{self.name} failed on {' '.join(targets)} (exit {proc.returncode}):\n{output[-3000:]}")
        return cpu

    def hook_times(self, cache: Path, targets: tuple[str, ...]) -> dict[str, Any]:
        """One run in a process of its own, timed by ``scripts/hook_timer.py`` (see :func:`timed_in_process`)."""
        plugin = ["--plugin"] if self.plugin else []
        cmd = [sys.executable, __file__, IN_PROCESS, *plugin, *self.mypy_args(cache, targets)]
        proc = subprocess.run(cmd, cwd=self.root, env=_env(self.root), capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"the timed run failed for {self.name}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        return json.loads(proc.stdout.splitlines()[-1])  # type: ignore[no-any-return]


IN_PROCESS = "--timed-in-process"


def timed_in_process(argv: list[str]) -> int:
    """``scripts/hook_timer.py``'s run, accepting a run whose code has errors (untyped code has plain mypy errors).

    hook_timer prints its figures only for a clean run (status 0); here
    mypy's status 1 (errors found, no crash) counts as clean.
    """
    import hook_timer
    from mypy import api

    run = api.run

    def run_accepting_errors(args: list[str]) -> tuple[str, str, int]:
        out, err, status = run(args)
        return out, err, 0 if status == 1 else status

    api.run = run_accepting_errors
    return hook_timer.main(argv)


def probe(tmp: Path) -> None:
    """Each side checks the probe: only the plugin side reports its SPMD error; else the benchmark stops."""
    for plugin in (True, False):
        root = tmp / f"probe_{int(plugin)}"
        root.mkdir()
        (root / "spmd_probe.py").write_text(PROBE)
        config = write_config(root, plugin)
        # torch skipped: the probe's error is about its arguments, and the check takes seconds, not a cold run's 20
        with config.open("a") as out:
            out.write("[mypy-torch.*]\nfollow_imports = skip\n")
        cmd = [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir", str(root / ".cache"),
               "spmd_probe.py"]
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=_env(root))
        reported = PROBE_ERROR in proc.stdout
        if reported != plugin:
            what = "the plugin is not active in the plugin runs" if plugin else "the plain runs load the plugin"
            raise SystemExit(f"bench_real_code: {what} (probe output below)\n{proc.stdout}{proc.stderr}")


def delete_entries(cache: Path, targets: tuple[str, ...]) -> None:
    """Remove the cache entries of the ``targets`` modules and packages (mypy's sqlite cache, every shard)."""
    databases = list(cache.rglob("cache*.db"))
    if not databases:
        raise SystemExit(f"no sqlite cache under {cache}: mypy's cache layout changed")
    deleted = dict.fromkeys(targets, 0)
    for database in databases:
        with sqlite3.connect(database) as db:
            for target in targets:
                prefix = target.replace(".", "/")
                deleted[target] += db.execute("DELETE FROM files2 WHERE path LIKE ? OR path LIKE ?",
                                              (prefix + "/%", prefix + ".%")).rowcount
    if missing := [target for target, count in deleted.items() if not count]:
        raise SystemExit(f"no cache entries of {', '.join(missing)}: the new-code runs would measure a warm check")


def prepare(tmp: Path, workload: Workload) -> dict[bool, Side]:
    """Each side's copy of the workload (erased for the plain side of typed code) and config."""
    sides = {}
    for plugin in (True, False):
        root = tmp / workload.name / ("plugin" if plugin else "plain")
        root.mkdir(parents=True)
        if workload.typed:
            for source in workload.sources():
                text = source.read_text()
                (root / source.name).write_text(text if plugin else erase(text))
        else:
            copy_installed(workload.packages, root)
        sides[plugin] = Side(plugin, root, write_config(root, plugin))
    return sides


def alternate(sides: dict[bool, Side], pairs: int, run: Callable[[Side], _R], first: bool = True) -> dict[bool, list[_R]]:
    """``pairs`` runs a side, the plugin side first in every other pair (starting with ``first``)."""
    runs: dict[bool, list[_R]] = {True: [], False: []}
    for n in range(pairs):
        order = (first, not first) if n % 2 == 0 else (not first, first)
        for plugin in order:
            runs[plugin].append(run(sides[plugin]))
    return runs


@dataclass
class Phase:
    plain: float
    plugin: float
    low: float
    high: float

    @classmethod
    def of(cls, runs: dict[bool, list[float]]) -> Phase:
        ratios = [a / b for a, b in zip(runs[True], runs[False])]
        return cls(statistics.median(runs[False]), statistics.median(runs[True]), min(ratios), max(ratios))

    def cells(self) -> str:
        ratio = f"{self.plugin / self.plain:.2f}"
        spread = f"{self.low:.2f}-{self.high:.2f}" if self.low != self.high else ""
        return f"{self.plain:7.2f} {self.plugin:7.2f} {ratio:>5} {spread:>9}"


def measure(tmp: Path, workload: Workload, repeats: int, first: bool, breakdown: bool) -> dict[str, Phase]:
    """The workload's phases (see the module docstring); ``first``: whether the plugin side opens the pairs.

    ``breakdown``: then one more new-code pair, each run in one process, and
    the plugin side's CPU split printed (see ``--breakdown``).
    """
    sides = prepare(tmp, workload)
    warm = {plugin: side.root / ".cache_warm" for plugin, side in sides.items()}

    def cold_run(side: Side) -> float:
        shutil.rmtree(warm[side.plugin], ignore_errors=True)
        return side.check(warm[side.plugin], workload.targets)

    phases = {"cold": Phase.of(alternate(sides, 1, cold_run, first))}
    phases["warm"] = Phase.of(alternate(sides, repeats, lambda side: side.check(warm[side.plugin], workload.targets)))

    def new_code_cache(side: Side) -> Path:
        cache = side.root / ".cache_new"
        shutil.rmtree(cache, ignore_errors=True)
        shutil.copytree(warm[side.plugin], cache)
        delete_entries(cache, workload.targets)
        return cache

    phases["new code"] = Phase.of(
        alternate(sides, repeats, lambda side: side.check(new_code_cache(side), workload.targets), first)
    )
    if breakdown:
        split = alternate(sides, 1, lambda side: side.hook_times(new_code_cache(side), workload.targets), first)
        print_breakdown(workload.name, split[False][0], split[True][0])
    return phases


def print_breakdown(name: str, plain: dict[str, Any], plugin: dict[str, Any]) -> None:
    """The plugin's new-code CPU beyond plain mypy's: its import, its hooks (by kind), and the rest."""
    hooks = sum(seconds for _, seconds in plugin["hooks"].values())
    extra = plugin["import"] + plugin["total"] - plain["total"]
    print(f"  {name} new code in one process: plain {plain['total']:.2f} s, plugin {plugin['total']:.2f} s "
          f"+ import {plugin['import']:.2f} s; extra {extra:.2f} s = import {plugin['import']:.2f} "
          f"+ hooks {hooks:.2f} + rest {extra - plugin['import'] - hooks:.2f}")
    top = sorted(plugin["hooks"].items(), key=lambda item: -item[1][1])[:4]
    print("    hooks: " + ", ".join(f"{kind} {calls} calls {seconds:.3f} s" for kind, (calls, seconds) in top), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--repeats", type=int, default=3, help="pairs of warm and of new-code runs (default 3)")
    parser.add_argument("--breakdown", action="store_true", help="also one new-code pair each in one process "
                        "(scripts/hook_timer.py): the plugin's import, its hooks and the rest of its extra CPU")
    args = parser.parse_args(argv)
    phases = ["cold", "warm", "new code"]
    with tempfile.TemporaryDirectory(prefix="spmd_bench_real_") as name:
        tmp = Path(name)
        probe(tmp)
        print("CPU seconds of the mypy process, medians: plain mypy, mypy + plugin, ratio plugin/plain, "
              f"range of the pairs' ratios; {args.repeats} pairs (cold: 1)")
        print(f"{'workload':<14} {'files':>5} {'lines':>6} " + " ".join(
            f"| {phase:<8} {'plain':>7} {'plugin':>7} {'ratio':>5} {'range':>9}" for phase in phases))
        for index, name in enumerate(args.workloads):
            workload = WORKLOADS[name]
            sources = workload.sources()
            measured = measure(tmp, workload, args.repeats, index % 2 == 0, args.breakdown)
            print(f"{name:<14} {len(sources):>5} {count_lines(sources):>6} " + " ".join(
                f"| {'':<8} {measured[phase].cells()}" for phase in phases), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(timed_in_process(sys.argv[2:]) if sys.argv[1:2] == [IN_PROCESS] else main())
