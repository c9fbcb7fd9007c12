"""Several configurations' mypy results as one: each diagnostic once, with the configurations it occurs in.

``spmd-check`` runs mypy with ``-O json`` in each configuration: one JSON
object a line, with mypy's fields (``file``, ``line``, ``column``,
``end_line``, ``end_column``, ``message``, ``hint``, ``code``,
``severity``; the notes mypy attaches to an error, at its place, are its
``hint``, one a line).  A diagnostic is the same in two configurations
when every field is equal.  Nothing is read from the text mypy prints:
an output flag changes how that text looks, never these fields.

With ``--show-error-context`` mypy also writes the function or class the
next diagnostics are in, as a note without a line (``In function "f":``),
only where it changes.  Each diagnostic keeps the one it is under
(:attr:`Diagnostic.context`), so that a merged report can say it again
wherever it changes there.  A line that is not such an object (mypy's
``--verbose`` has its log on stderr; a warning can be on stdout) is kept
as it came, apart from the diagnostics.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace


@dataclass(frozen=True)
class Diagnostic:
    """One of mypy's JSON diagnostics (its fields in mypy's order), and the context it is under."""

    file: str
    line: int
    column: int
    end_line: int
    end_column: int
    message: str
    hint: str | None
    code: str | None
    severity: str
    context: str | None = field(default=None, compare=False)
    """``--show-error-context``'s note in effect where it is (``In function "f":``); ``None`` at the top
    of a file; not part of what makes two diagnostics the same (the place decides it)."""

    def fields(self) -> dict[str, object]:
        """mypy's fields, as its ``-O json`` writes them."""
        found = asdict(self)
        del found["context"]
        return found

    @property
    def has_no_place(self) -> bool:
        """A note with no line, column or code: how mypy's JSON writes ``--show-error-context``'s notes."""
        return self.severity == "note" and self.line < 0 and self.column < 0 and self.code is None


_FIELDS = frozenset(f.name for f in fields(Diagnostic)) - {"context"}


@dataclass
class Output:
    """One mypy run's ``-O json`` output, read."""

    diagnostics: list[Diagnostic]
    other_lines: list[str]
    """What its stdout had besides diagnostics, as it came."""

    @property
    def errors(self) -> int:
        return sum(d.severity == "error" for d in self.diagnostics)


def read(stdout: str) -> Output:
    """mypy's ``-O json`` output: its diagnostics, each with the context it is under, and the other lines."""
    output = Output([], [])
    pending: Diagnostic | None = None  # a note with no place: the context of what follows it in its file
    file, context = "", None
    for line in stdout.splitlines():
        diagnostic = _diagnostic(line)
        if diagnostic is None:
            output.other_lines.append(line)
            continue
        if pending is not None and (diagnostic.has_no_place or diagnostic.file != pending.file):
            output.diagnostics.append(pending)  # nothing in its file came under it: a note of its own
            pending = None
        if diagnostic.has_no_place:
            pending = diagnostic
            continue
        if diagnostic.file != file:
            file, context = diagnostic.file, None
        if pending is not None:
            context, pending = pending.message, None
        output.diagnostics.append(replace(diagnostic, context=context))
    if pending is not None:
        output.diagnostics.append(pending)
    return output


def _diagnostic(line: str) -> Diagnostic | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if not isinstance(value, dict) or set(value) != _FIELDS:
        return None
    return Diagnostic(**value)


def merged(outputs: dict[str, Output]) -> list[tuple[Diagnostic, list[str]]]:
    """Each configuration's output (by name, in order) -> every distinct diagnostic with the
    configurations it occurs in, in mypy's order: files as they first came, then by position
    (diagnostics at one place in the order mypy gave them)."""
    where: dict[Diagnostic, list[str]] = {}
    for name, output in outputs.items():
        for diagnostic in output.diagnostics:
            occurs = where.setdefault(diagnostic, [])
            if name not in occurs:
                occurs.append(name)
    files = {file: order for order, file in enumerate(dict.fromkeys(d.file for d in where))}
    return sorted(where.items(), key=lambda item: (files[item[0].file], item[0].line, item[0].column))
