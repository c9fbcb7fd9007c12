"""Fuzz the mypy plugin at scale: many rounds of hostile modules, one mypy run each.

    python scripts/fuzz_plugin.py [--rounds 20] [--modules 100] [--seed 0]

Prints per round the number of modules, spmd errors reported and whether
mypy crashed (a traceback, INTERNAL ERROR, or an exit status other than
0/1); a crashing round's output is printed and its modules kept.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests" / "fuzz"), str(REPO / "tests" / "property")]

from fuzz_sources import modules  # noqa: E402
from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from test_fuzz_plugin import fuzz_round  # noqa: E402


def draw_rounds(rounds: int, size: int, seed_value: int) -> list[list[str]]:
    """``rounds`` batches of ``size`` modules, one module per hypothesis example
    (a whole batch per example would overrun hypothesis's data budget)."""
    drawn: list[str] = []

    @seed(seed_value)
    @settings(max_examples=rounds * size, deadline=None, database=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(modules())
    def draw(source: str) -> None:
        drawn.append(source)

    draw()
    return [drawn[i : i + size] for i in range(0, len(drawn), size)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--modules", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    crashes = checked = 0
    codes: Counter[str] = Counter()
    work = Path(tempfile.mkdtemp(prefix="spmd_fuzz_"))
    start = time.perf_counter()
    for number, sources in enumerate(draw_rounds(args.rounds, args.modules, args.seed)):
        run = fuzz_round(sources, work / f"round_{number:03d}", work / "cache")
        for errors in run.files.values():
            codes.update(c for c in errors.codes if c.startswith("spmd"))
        crashes += run.crashed
        checked += len(sources)
        print(f"round {number}: {len(sources)} modules, exit {run.returncode}, {'CRASH' if run.crashed else 'ok'}", flush=True)
        if run.crashed:
            print(run.output[-6000:])
    print(f"\n{checked} fuzz modules in {time.perf_counter() - start:.0f} s, mypy crashes: {crashes}")
    print("spmd error codes reported (modules):", dict(codes.most_common()))
    print(f"modules kept in {work}")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
