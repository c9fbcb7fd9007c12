"""Writes ``docs/errors.md`` from the per-code case files (``cases/errors``, ``cases/strict``, ``cases/configurations``,
``cases/runtime_classes``, ``cases/plans``, ``cases/dtensor_local_map``).

Each example in the document *is* a case file the test suite runs, so every
``wrong`` example is checked to give its error and every ``fixed`` one to
check clean.  Run ``python -m tests.plugin.generate_errors_doc`` after
editing one; a test fails while the document is stale.
"""

from __future__ import annotations

import ast
from pathlib import Path

from spmd_mypy import errorcodes
from tests.plugin.harness import CASES, ROOT

TARGET = ROOT / "docs" / "errors.md"
EXAMPLE_DIRS = (CASES / "errors", CASES / "strict", CASES / "configurations", CASES / "runtime_classes",
                CASES / "plans", CASES / "dtensor_local_map")
INTRO = """# spmd_mypy error codes

Every code is a sub-code of `spmd`: silence one with
`# type: ignore[spmd-partial-mul]`, all of them with `# type: ignore[spmd]` or
`--disable-error-code spmd` (or `disable_error_code = spmd` in the config).
Every error line says in one short sentence what is wrong, on which mesh axis,
with the operand types in `R@tp` form; `note:` lines on the same line follow it:
the expression (`` In `a * b`: ``) with why it is wrong, then the fix (`Fix:`,
or `Fix (needs your choice):`), and with `show_fixes` the fix as an edit.

<!-- excerpt -->
```
t.py:7: error: add adds a Partial to a non-Partial operand on axis tp (P@tp + R@tp)  [spmd-partial-affine]
t.py:7: note: In `partial + bias`: the R@tp term would be counted once per rank by the pending sum.
t.py:7: note: Fix: all_reduce(x, tp, src=P, dst=R) on the Partial operand first, or convert(y, tp, src=R, dst=P) on the other term.
```

Each example below is a test case (`tests/plugin/cases/...`): the `# E:` comment
is the error the checker must report on that line (its text found in the error
line or its notes) and `# N:` what `reveal_type` must show; `wrong` must give
exactly those errors and `fixed` must check clean.
This page is generated from them by `python -m tests.plugin.generate_errors_doc`.

| code | when |
|---|---|
"""


def example_path(code: str) -> Path | None:
    for directory in EXAMPLE_DIRS:
        path = directory / f"{code.replace('-', '_')}.py"
        if path.exists():
            return path
    return None


def summary(path: Path) -> str:
    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    return docstring.partition(": ")[2].strip()


def codes() -> list[str]:
    return [
        c.code
        for c in (*errorcodes.BY_RULE.values(), errorcodes.UNMODELLED, errorcodes.MISSING_AXIS, errorcodes.AUTOGRAD,
                  errorcodes.UNTYPED_BOUNDARY, errorcodes.CONFIGURATION, errorcodes.SETTINGS, errorcodes.RUNTIME_RULE, errorcodes.PLAN,
                  errorcodes.LOCAL_MAP, errorcodes.ASYNC)
    ]


def render() -> str:
    rows, sections = [], []
    for code in codes():
        path = example_path(code)
        if path is None:
            raise FileNotFoundError(f"no example case file for {code}")
        rows.append(f"| [`{code}`](#{code}) | {summary(path)} |")
        relative = path.relative_to(ROOT)
        sections.append(f"## {code}\n\n{summary(path)}\n\n`{relative}`:\n\n```python\n{path.read_text()}```\n")
    internal = (
        f"## {errorcodes.INTERNAL.code}\n\nThe checker itself failed on an expression (a bug: please report it "
        "with the code). The expression's result is treated as unknown and mypy carries on; no example exists "
        "because no input should produce it.\n"
    )
    return INTRO + "\n".join(rows) + f"\n| `{errorcodes.INTERNAL.code}` | the checker failed (a bug) |\n\n" + "\n".join(sections) + "\n" + internal


if __name__ == "__main__":
    TARGET.write_text(render())
