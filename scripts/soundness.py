"""Soundness at scale: thousands of random typed programs, both sides measured.

* Accepted programs (mypy + the spmd plugin report nothing): run through the
  runtime shim in the simulated 4-rank world; their per-rank input gradients
  must equal plain autograd over the program's global meaning. Every
  mismatch is a soundness bug; it is printed with its program.
* Rejected programs: run anyway (the checker bypassed); per error code, how
  many the runtime refused (a ValueError from the shim), how many gave wrong
  gradients, and how many were right after all.

The programs include index ops with typed and computed indices and the
uneven all_to_all (``spmd_programs.programs(extended=True)``), some of whose
counts vary where the rows do not (``UNEVEN_COUNTS_VARY_WHERE_ROWS_DO_NOT``,
counted as a feature), and moves to ``ep``, the flattening of (dp, tp) over the
same ranks, by ``reinterpret_mesh`` (``spmd_meshes``: steps on ep, the move back
or a loss on ep; in wild programs mixed groups and the wrong order ``{(tp, dp): ep}``,
whose accepted programs the runtime refuses, counted apart).

    python scripts/soundness.py --programs 5000 [--batch 250] [--seed 0] [--checker rules]

The generator, reference and harness live in tests/property/.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests" / "property")]

from spmd_programs import draw  # noqa: E402
from spmd_soundness import Report, process_batch, simulated_world  # noqa: E402


def print_report(report: Report, seconds: float) -> None:
    print(f"\nprograms: {report.programs} in {seconds:.0f} s")
    print(f"accepted: {report.accepted} ({report.accepted_without_gradients} with an operand without a gradient); "
          f"gradient mismatches: {len(report.mismatches)}; "
          f"runtime errors on accepted programs: {len(report.accepted_runtime_errors)}")
    print(f"accepted, the regrouping's ranks refused at run time ({{(tp, dp): ep}}): {report.accepted_refused_regroupings}")
    print(f"mypy crashes: {len(report.mypy_crashes)}; checker vs algebra prediction disagreements: {len(report.disagreements)}")
    print(f"rejected: {report.programs - report.accepted}")
    print(f"\n{'helper call or feature':<34} {'accepted':>9} {'rejected':>9} {'rejected, wrong gradients':>26}")
    for kind in sorted(report.accepted_calls | report.rejected_calls):
        print(f"{kind:<34} {report.accepted_calls[kind]:>9} {report.rejected_calls[kind]:>9} {report.rejected_calls_wrong[kind]:>26}")
    print(f"\n{'error code':<26} {'programs':>9} {'refused at runtime':>19} {'wrong gradients':>16} {'right anyway':>13} {'wrong / ran':>12}")
    for code, n in report.rejected.most_common():
        refused, wrong = report.rejected_refused[code], report.rejected_wrong[code]
        ran = n - refused
        rate = f"{wrong / ran:.0%}" if ran else "-"
        print(f"{code:<26} {n:>9} {refused:>19} {wrong:>16} {ran - wrong:>13} {rate:>12}")
    for title, items in (("MISMATCH", report.mismatches),
                         ("RUNTIME ERROR ON ACCEPTED", report.accepted_runtime_errors),
                         ("DISAGREEMENT", report.disagreements[:5]), ("MYPY CRASH", report.mypy_crashes)):
        for item in items:
            print(f"\n=== {title}\n{item}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=250, help="programs per mypy run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checker", choices=["mypy", "rules"], default="mypy",
                        help="mypy with the plugin (the product), or the algebra's own verdicts (the rules alone)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    report = Report()
    drawn = draw(args.programs, args.seed, helpers=True, extended=True)
    with tempfile.TemporaryDirectory(prefix="spmd_soundness_") as tmp, simulated_world() as mesh:
        for first in range(0, len(drawn), args.batch):
            batch = drawn[first : first + args.batch]
            process_batch(batch, Path(tmp) / "batch", Path(tmp) / "cache", mesh, seed=args.seed + first, report=report, checker=args.checker)
            print(f"{report.programs} programs, {report.accepted} accepted, {len(report.mismatches)} mismatches "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)
    print_report(report, time.perf_counter() - start)
    return 1 if report.mismatches or report.accepted_runtime_errors or report.mypy_crashes else 0


if __name__ == "__main__":
    sys.exit(main())
