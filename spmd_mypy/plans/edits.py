"""A plan fix as an edit of the source (``show_fixes``, docs/checker.md#fixes-as-edits).

A changed entry replaces its style as written; an added entry is written
first in the plan's dict display, on a line of its own where the display
spreads its entries over lines.  The imports are those of the names the
style uses that the module lacks (:mod:`spmd_mypy.source_edits`).
"""

from __future__ import annotations

from mypy.checker import TypeChecker
from mypy.nodes import DictExpr

from spmd_mypy.plans.assembled import Entry
from spmd_mypy.source_edits import Index, Span, located_edit_note, span_of


def edit_note(api: TypeChecker, fix: Entry, display: DictExpr | None) -> str | None:
    """The note carrying ``fix`` as an edit: its ``value`` replaced, or (no ``value``) the entry added to
    ``display``; None where the source cannot be read."""

    def locate(lines: list[str], index: Index) -> tuple[Span | None, str] | None:
        if fix.value is not None:
            return span_of(fix.value, lines, index), str(fix.style)
        return _insertion(display, fix, lines, index) if display is not None else None

    return located_edit_note(api, locate)


def _insertion(display: DictExpr, fix: Entry, lines: list[str], index: Index) -> tuple[Span | None, str]:
    """Right after the display's ``{``: ``"key": Style(),`` on a line of its own where its first entry is on a
    later line, else before that entry on the same line."""
    start = index(lines[display.line - 1], display.column)
    brace = lines[display.line - 1].find("{", start)
    if brace < 0:
        return None, ""
    entry = f'"{fix.key}": {fix.style}'
    first = display.items[0][0] if display.items else None
    if first is not None and first.line > display.line:
        indent = " " * index(lines[first.line - 1], first.column)
        return (display.line, brace + 1, display.line, brace + 1), f"\n{indent}{entry},"
    return (display.line, brace + 1, display.line, brace + 1), f"{entry}, " if first is not None else entry
