"""Several configurations' mypy outputs as one: each diagnostic once, labelled where it occurs.

A diagnostic is a ``path:line[:column]: severity: message`` line with the
lines that continue it (``--pretty``'s source excerpts) and the notes mypy
attaches to it (same path and line, right after it).  One found in every
configuration is printed as mypy printed it; one found in some is labelled
with them, after the severity, where editors and CI parsers keep reading
the message::

    model.py:28: error: [sp] In `F.layer_norm(x, ...)`: layer_norm mixes Invariant with Varying ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEAD = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?:(?P<column>\d+):)? (?P<severity>error|warning|note): ")


@dataclass(frozen=True)
class Diagnostic:
    """One diagnostic's text, as mypy printed it, and where it is."""

    text: str
    path: str
    line: int
    column: int
    severity: str

    def labelled(self, configurations: list[str]) -> str:
        """The text with ``[sp, ...]`` after the severity of its first line."""
        head = _HEAD.match(self.text)
        assert head is not None
        label = f"[{', '.join(configurations)}] "
        return self.text[: head.end()] + label + self.text[head.end() :]


def diagnostics(output: str) -> list[Diagnostic]:
    """mypy's output, one :class:`Diagnostic` per reported problem (lines before the first, a summary
    line after the last, are left out)."""
    found: list[Diagnostic] = []
    for line in output.splitlines():
        head = _HEAD.match(line)
        if head is None:
            if found and not _summary(line):
                found[-1] = _extended(found[-1], line)
            continue
        where = (head["path"], int(head["line"]))
        if head["severity"] == "note" and found and (found[-1].path, found[-1].line) == where:
            found[-1] = _extended(found[-1], line)
        else:
            found.append(Diagnostic(line, *where, int(head["column"] or 0), head["severity"]))
    return found


def merged(outputs: dict[str, str]) -> list[tuple[Diagnostic, list[str]]]:
    """Each configuration's output (by name, in order) -> every distinct diagnostic with the
    configurations it occurs in, in mypy's order (by path, then position)."""
    where: dict[Diagnostic, list[str]] = {}
    for name, output in outputs.items():
        for diagnostic in diagnostics(output):
            occurs = where.setdefault(diagnostic, [])
            if name not in occurs:
                occurs.append(name)
    paths = list(dict.fromkeys(d.path for d in where))
    return sorted(where.items(), key=lambda item: (paths.index(item[0].path), item[0].line, item[0].column))


def report(outputs: dict[str, str]) -> tuple[list[str], int]:
    """The merged diagnostics' lines (labels left out where a diagnostic occurs everywhere) and the
    number of distinct errors."""
    lines, errors = [], 0
    for diagnostic, occurs in merged(outputs):
        everywhere = len(occurs) == len(outputs)
        lines.append(diagnostic.text if everywhere else diagnostic.labelled(occurs))
        errors += diagnostic.severity == "error"
    return lines, errors


def _extended(diagnostic: Diagnostic, line: str) -> Diagnostic:
    return Diagnostic(f"{diagnostic.text}\n{line}", diagnostic.path, diagnostic.line, diagnostic.column,
                      diagnostic.severity)


def _summary(line: str) -> bool:
    """mypy's last line (``Found 2 errors in 1 file ...``, ``Success: ...``)."""
    return line.startswith(("Found ", "Success: "))
