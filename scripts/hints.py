"""The hint harness at scale: apply every fix the checker prints as an edit, check again, run the result.

Three sources (tests/hints/harness.py, tests/property/spmd_hints.py):

* the case files (tests/plugin/cases): one hint at a time, the copy must
  lose its error and gain none;
* the bug gallery (examples/bugs): every bug fixed as a whole, round after
  round (its gloo run against the reference is tests/examples/test_bug_hints.py);
* generated programs the checker rejects: fixed as a whole, then run in the
  simulated 4-rank world against the reference gradients.

    python scripts/hints.py [--programs 2000] [--batch 250] [--seed 0]

Prints, per error code, how many diagnostics there were, how many carry an
edit, and how many of those gave a program that checks clean (and, where
there is a reference, computes it); then every hint that checked clean but
computed something else (a bug).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "property")]

from spmd_hints import Judged, judge_hints  # noqa: E402
from spmd_programs import draw  # noqa: E402
from spmd_soundness import simulated_world  # noqa: E402

from tests.hints.harness import Tally, copy_into, fix_each, fix_whole  # noqa: E402
from tests.plugin.harness import case_files  # noqa: E402


def print_tally(title: str, tally: Tally) -> None:
    print(f"\n{title}\n{'error code':<26} {'errors':>7} {'edits':>6} {'tried':>6} {'right':>6} {'right / tried':>14}")
    for code, errors, edits, tried, right in tally.rows():
        share = f"{right / tried:.0%}" if tried else "-"
        print(f"{code:<26} {errors:>7} {edits:>6} {tried:>6} {right:>6} {share:>14}")
    for wrong in tally.wrong:
        print(f"\n=== CHECKS CLEAN BUT WRONG\n{wrong}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=250)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="spmd_hints_") as tmp:
        work = Path(tmp)
        cases = copy_into(case_files(), work / "cases", lambda p: "_".join(p.relative_to(REPO / "tests/plugin/cases").parts))
        print_tally("Case files, one hint at a time (right: the copy loses its error and gains none)",
                    fix_each(cases, work / "cases"))
        gallery = copy_into(sorted((REPO / "examples" / "bugs").glob("*_bug.py")), work / "gallery")
        print("\nBug gallery, fixed as a whole:")
        for path, whole in fix_whole(gallery, work / "gallery").items():
            print(f"  {path.name:<36} {whole.status.value} after {whole.rounds} round(s)")
        judged = Judged()
        drawn = draw(args.programs, args.seed)
        with simulated_world() as mesh:
            for first in range(0, len(drawn), args.batch):
                judge_hints(drawn[first : first + args.batch], work / "generated", mesh, args.seed + first, judged)
                print(f"{min(first + args.batch, len(drawn))} programs ({time.perf_counter() - start:.0f} s)", flush=True)
        print("\nGenerated programs the checker rejects, fixed as a whole:",
              ", ".join(f"{n} {status.value}" for status, n in judged.status.items()))
        print(f"of those that check clean: {judged.unrunnable} cannot run, as their original could not; "
              f"{len(judged.crashes)} raise where their original ran")
        print_tally("Their hints (right: the program checks clean and computes the reference gradients)", judged.tally)
        for crash in judged.crashes:
            print(f"\n=== CHECKS CLEAN BUT RAISES\n{crash}")
    print(f"\n{time.perf_counter() - start:.0f} s")
    return 1 if judged.tally.wrong else 0


if __name__ == "__main__":
    sys.exit(main())
