"""Benchmark: checking N configurations (``spmd-check``) against checking one (``mypy``), cold and warm.

Two workloads, each checked clean, each run a fresh process:

* ``examples``: the typed GPT (its layers test ``self.sequence_parallel``), the
  MLP, global-mode and softmax examples, under examples/mypy.ini;
* ``generated``: ``scripts/bench_checker.py``'s package of typed
  tensor-parallel blocks (about 10k lines by default).

Side by side in one run, with N configurations declared (``sequence_parallel``
on and off, and more sets of flags for N > 2):

* cold: an empty cache directory, torch analysed from scratch: one
  configuration's ``mypy`` against ``spmd-check`` over all N (it analyses
  torch once and starts the other configurations from a copy of that cache);
* warm: the same commands again, median of ``--repeat``.

    python scripts/bench_configurations.py [--configurations 2] [--lines 10000] [--repeat 5]
                                           [--workloads examples,generated]

The ratios N-configurations / one are printed with the bounds the design
aims at (warm at most N, cold well under N); nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_checker import REPO, count_lines, generate, timed

EXAMPLES = ["gpt", "train_mlp.py", "global_mlp.py", "vocab_parallel_softmax.py"]


def configurations(count: int) -> str:
    """``count`` configurations: sequence parallelism on and off, then other sets of flags."""
    declared = ["sp: sequence_parallel = true", "no_sp: sequence_parallel = false"]
    declared += [f"sp_{k}: sequence_parallel = true, recompute_{k} = true" for k in range(count - 2)]
    return "\n".join(f"    {line}" for line in declared[:count])


def write_config(root: Path, count: int) -> Path:
    """examples/mypy.ini's torch skips with ``count`` configurations."""
    recommended = (REPO / "spmd_mypy" / "recommended.ini").read_text()
    config = root / "mypy.ini"
    config.write_text(f"{recommended}\n[spmd_mypy]\nconfigurations =\n{configurations(count)}\n")
    return config


def run(command: list[str], root: Path, what: str) -> float:
    """The seconds a clean check takes; a failing one stops the benchmark."""
    seconds, proc = timed(command, root)
    if proc.returncode != 0:
        raise SystemExit(f"{what} did not check clean:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return seconds


def measure(root: Path, targets: list[str], config: Path, repeat: int) -> dict[str, float]:
    """Cold and warm seconds of one configuration's mypy run and of spmd-check over all."""
    python = sys.executable
    one_cache, all_cache = root / "cache_one", root / "cache_all"
    one = ["env", "SPMD_MYPY_CONFIGURATION=sp", python, "-m", "mypy", "--config-file", str(config),
           "--cache-dir", str(one_cache), *targets]
    every = [python, "-m", "spmd_mypy.configurations.cli", "--config-file", str(config),
             "--cache-dir", str(all_cache), *targets]
    for cache in (one_cache, all_cache):
        shutil.rmtree(cache, ignore_errors=True)
    return {
        "one cold": run(one, root, "mypy, one configuration (cold)"),
        "all cold": run(every, root, "spmd-check (cold)"),
        "one warm": statistics.median(run(one, root, "mypy (warm)") for _ in range(repeat)),
        "all warm": statistics.median(run(every, root, "spmd-check (warm)") for _ in range(repeat)),
    }


def copy_examples(root: Path) -> list[Path]:
    """The examples checked, copied under ``root``; their files."""
    examples = root / "examples"
    examples.mkdir()
    for name in EXAMPLES:
        source = REPO / "examples" / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, examples / name)
    return sorted(examples.rglob("*.py"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--configurations", type=int, default=2, help="N, at least 2")
    parser.add_argument("--lines", type=int, default=10000, help="size of the generated package")
    parser.add_argument("--repeat", type=int, default=5, help="warm runs, the median is printed")
    parser.add_argument("--workloads", default="examples,generated", help="comma-separated: examples, generated")
    args = parser.parse_args(argv)
    workloads = set(args.workloads.split(","))
    count = max(2, args.configurations)
    results = {}
    with tempfile.TemporaryDirectory(prefix="spmd_bench_configurations_") as tmp:
        root = Path(tmp)
        config = write_config(root, count)
        if "examples" in workloads:
            files = copy_examples(root)
            results[f"examples ({count_lines(files)} lines)"] = measure(
                root, [str(f.relative_to(root)) for f in files], config, args.repeat)
        if "generated" in workloads:
            lines = count_lines(generate(root, args.lines, typed=True))
            results[f"generated ({lines} lines)"] = measure(root, ["-p", "benchpkg"], config, args.repeat)
    print(f"{count} configurations; seconds, cold = empty cache, warm = median of {args.repeat}; "
          f"{os.cpu_count()} cores")
    print(f"{'workload':<26} {'1 cold':>7} {'N cold':>7} {'ratio':>6} {'1 warm':>7} {'N warm':>7} {'ratio':>6}")
    for workload, t in results.items():
        print(f"{workload:<26} {t['one cold']:7.2f} {t['all cold']:7.2f} {t['all cold'] / t['one cold']:6.2f} "
              f"{t['one warm']:7.2f} {t['all warm']:7.2f} {t['all warm'] / t['one warm']:6.2f}")
    print(f"bounds: warm ratio at most {count} (N warm runs), cold ratio well under {count} (torch analysed once)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
