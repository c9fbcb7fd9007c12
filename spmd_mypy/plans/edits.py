"""A plan fix as an edit of the source (``show_fixes``, docs/checker.md#fixes-as-edits).

A changed entry replaces its style as written; an added entry is written
first in the plan's dict display, on a line of its own where the display
spreads its entries over lines.  The imports are those of the names the
style uses that the module lacks (styles from
``torch.distributed.tensor.parallel``, placements from
``torch.distributed.tensor``).
"""

from __future__ import annotations

import json
import re
from typing import Callable

from mypy.checker import TypeChecker
from mypy.nodes import DictExpr, Expression

from spmd_mypy.build_state import state_of
from spmd_mypy.fixes import PREFIX
from spmd_mypy.plans.assembled import Entry
from spmd_mypy.sources import SourceUnreadable
from spmd_stubs.core.parallel_styles import STYLES

_PLACEMENTS = ("Replicate", "Shard", "Partial")
_NAME = re.compile(r"\b([A-Z]\w*)\(")

Span = tuple[int, int, int, int]
"""An edit's line, column, end line and end column (columns as ``str`` indices)."""
Index = Callable[[str, int], int]
"""The index in a line of the character at mypy's column."""


def edit_note(api: TypeChecker, fix: Entry, display: DictExpr | None) -> str | None:
    """The note carrying ``fix`` as an edit: its ``value`` replaced, or (no ``value``) the entry added to
    ``display``; None where the source cannot be read."""
    sources = state_of(api).sources
    try:
        lines = sources.lines(api.tree)
        if fix.value is not None:
            span = _span(fix.value, lines, sources.index)
            replacement = str(fix.style)
        elif display is not None:
            span, replacement = _insertion(display, fix, lines, sources.index)
        else:
            return None
    except (SourceUnreadable, IndexError):
        return None
    if span is None:
        return None
    line, column, end_line, end_column = span
    edit = {"line": line, "column": column, "end_line": end_line, "end_column": end_column,
            "replacement": replacement, "imports": _imports(api, replacement)}
    return PREFIX + json.dumps(edit)


def _span(node: Expression, lines: list[str], index: Index) -> Span | None:
    if node.end_line is None or node.end_column is None:
        return None
    return (node.line, index(lines[node.line - 1], node.column), node.end_line,
            index(lines[node.end_line - 1], node.end_column))


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


def _imports(api: TypeChecker, replacement: str) -> list[str]:
    names = api.tree.names
    needed = []
    for name in dict.fromkeys(_NAME.findall(replacement)):
        if name in names:
            continue
        if name in STYLES:
            needed.append(f"from torch.distributed.tensor.parallel import {name}")
        elif name in _PLACEMENTS:
            needed.append(f"from torch.distributed.tensor import {name}")
    return needed
