"""``spmd-coverage``: the command.

    spmd-coverage [--config-file F] [--cache-dir D] [--json FILE] [--top N] PATH...

Checks PATH (files or directories) as mypy would with that config, in the
plugin's strict mode, and prints a short summary: the overall share of
tensor-valued expressions with a known SPMD type, the modules and
functions with the lowest shares, and the places that cut off the most
typed flow.  ``--json FILE`` writes every figure and every place.  Exit
status 0 (a report, whatever it finds); 2 where mypy stops (a bad config,
a syntax error, a missing path), with mypy's message.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from mypy.errors import CompileError

from spmd_mypy.coverage.figures import Figures
from spmd_mypy.coverage.report import Coverage, measure
from spmd_mypy.typed_run import check
from spmd_mypy.versions import package_version

_MESSAGE_WIDTH = 110


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    missing = [str(path) for path in arguments.paths if not path.exists()]
    if missing:
        print(f"spmd-coverage: error: no such file or directory: {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        run = check(arguments.paths, arguments.config_file, arguments.cache_dir, strict=True)
    except CompileError as error:
        print("\n".join(error.messages) or "mypy stopped", file=sys.stderr)
        print("spmd-coverage: error: mypy stopped before checking; no report", file=sys.stderr)
        return 2
    except SystemExit as stopped:  # mypy's option parsing has printed why
        print("spmd-coverage: error: mypy refused the options or paths; no report", file=sys.stderr)
        return stopped.code if isinstance(stopped.code, int) and stopped.code else 2
    coverage = measure(run)
    print(summary(coverage, arguments.top))
    if arguments.json is not None:
        arguments.json.write_text(json.dumps(coverage.as_json(), indent=1) + "\n")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spmd-coverage",
        description="How much of a code base has known SPMD types, and where typed values become unknown.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="files or directories to check")
    parser.add_argument("--config-file", type=Path, help="mypy's config file (default: the one mypy finds)")
    parser.add_argument("--cache-dir", type=Path, help="mypy's cache directory")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write every figure and place to FILE")
    parser.add_argument("--top", type=int, default=5, metavar="N", help="lines per list in the summary (5)")
    return parser


def summary(coverage: Coverage, top: int = 5) -> str:
    """The text the command prints."""
    overall = coverage.figures
    lines = [f"SPMD coverage: {_share(overall)} of tensor-valued expressions have a known SPMD type "
             f"({overall.known} of {overall.expressions}) in {len(coverage.modules)} modules"]
    modules = [(f"{m.module} ({m.path})", m.figures) for m in coverage.modules]
    functions = [(f"{f.module}: {f.name}", f.figures) for f in coverage.functions]
    for title, rows in (("modules", modules), ("functions", functions)):
        lowest = sorted(((n, f) for n, f in rows if f.unknown), key=lambda r: (r[1].share or 0.0, -r[1].unknown))
        if lowest:
            lines.append(f"Lowest {title} ({len(lowest)} not fully known):")
            lines += [f"  {_share(f):>6}  {f.known} of {f.expressions}  {name}" for name, f in lowest[:top]]
    if coverage.places:
        lines.append(f"Places where typed values become unknown ({len(coverage.places)}, most typed flow cut first):")
        lines += [_place(p.path, p.line, p.column, p.kind, p.cut, p.message) for p in coverage.places[:top]]
    else:
        lines.append("No place where a typed value becomes unknown.")
    if coverage.other_errors:
        lines.append(f"({coverage.other_errors} other errors in strict mode: run mypy to see them)")
    return "\n".join(lines)


def _share(figures: Figures) -> str:
    share = figures.share
    return "-" if share is None else f"{100 * share:.1f}%"


def _place(path: str, line: int, column: int | None, kind: str, cut: int, message: str) -> str:
    where = f"{path}:{line}" + (f":{column}" if column is not None else "")
    text = message.split(" Fix")[0]
    text = text if len(text) <= _MESSAGE_WIDTH else text[: _MESSAGE_WIDTH - 3] + "..."
    return f"  {where}: {kind}, cuts {cut}: {text}"
