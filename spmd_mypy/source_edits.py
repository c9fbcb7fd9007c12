"""A fix as an edit of the source: a span of the checked module and its replacement (docs/checker.md#fixes-as-edits).

The note is ``Fix as an edit: {json}`` with the span's line, column, end
line and end column (columns as ``str`` indices), the replacement, and the
imports the replacement's names need that the module lacks (DTensor's
parallel styles and placements).  Plans and DTensor's ``local_map`` write
theirs through here.
"""

from __future__ import annotations

import json
import re
from typing import Callable

from mypy.checker import TypeChecker
from mypy.nodes import Expression

from spmd_mypy.build_state import state_of
from spmd_mypy.fixes import PREFIX
from spmd_mypy.sources import SourceUnreadable
from spmd_stubs.core.parallel_styles import STYLES

_PLACEMENTS = ("Replicate", "Shard", "Partial")
_NAME = re.compile(r"\b([A-Z]\w*)\(")

Span = tuple[int, int, int, int]
"""An edit's line, column, end line and end column (columns as ``str`` indices)."""
Index = Callable[[str, int], int]
"""The index in a line of the character at mypy's column."""
Locate = Callable[[list[str], Index], "tuple[Span | None, str] | None"]
"""Where an edit goes in the module's lines, and what it writes there; None where it cannot say."""


def located_edit_note(api: TypeChecker, locate: Locate) -> str | None:
    """The note carrying the edit ``locate`` places; None where the source cannot be read or placed."""
    sources = state_of(api).sources
    try:
        placed = locate(sources.lines(api.tree), sources.index)
    except (SourceUnreadable, IndexError):
        return None
    span, replacement = placed if placed is not None else (None, "")
    if span is None:
        return None
    line, column, end_line, end_column = span
    edit = {"line": line, "column": column, "end_line": end_line, "end_column": end_column,
            "replacement": replacement, "imports": _imports(api, replacement)}
    return PREFIX + json.dumps(edit)


def span_of(node: Expression, lines: list[str], index: Index) -> Span | None:
    """The span ``node`` covers; None where mypy kept no end."""
    if node.end_line is None or node.end_column is None:
        return None
    return (node.line, index(lines[node.line - 1], node.column), node.end_line,
            index(lines[node.end_line - 1], node.end_column))


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
