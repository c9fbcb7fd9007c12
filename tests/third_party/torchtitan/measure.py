"""One strict mypy run with the plugin over torchtitan's copied modules: every diagnostic and the coverage report.

    python measure.py --config-file mypy.ini --cache-dir D --json OUT PATH...

Run from the root the modules were copied under.  Writes to OUT one JSON
document: ``diagnostics`` (every line of mypy's report: path, line, column,
severity, code, message) and ``coverage`` (``spmd-coverage --json``'s
figures and places, docs/checker.md#coverage-where-do-types-die), both from
the same run, so the test reads findings and coverage without a second check.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from spmd_mypy.coverage.report import measure
from spmd_mypy.typed_run import check


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--config-file", type=Path, required=True)
    parser.add_argument("--cache-dir", type=Path, required=True)
    parser.add_argument("--json", type=Path, required=True)
    arguments = parser.parse_args()
    run = check(arguments.paths, arguments.config_file, arguments.cache_dir, strict=True)
    report = {"diagnostics": [dataclasses.asdict(d) for d in run.diagnostics],
              "coverage": measure(run).as_json()}
    arguments.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
