"""``spmd-check``'s merged report, written as mypy writes its own for the output settings given.

The settings are mypy's own reading of the command line and config file
(its ``Options``), and the writing is mypy's own code, so every output
setting keeps its meaning:

- text: mypy's renderer (``--show-column-numbers``, ``--show-error-end``,
  ``--hide-error-codes``, ``--show-absolute-path``, ``--pretty``'s source
  excerpts and wrapping, ``--show-error-context``'s notes where the
  context changes), with ``[sp, ...]`` after the severity of a diagnostic
  that occurs in some configurations only; colour as mypy decides it (on
  a terminal or with ``MYPY_FORCE_COLOR``, never with
  ``--no-color-output``).  The notes mypy attaches to an error come back
  from its JSON without their codes: a code mypy shows on a note
  (``annotation-unchecked``, ``deprecated``) is shown on such a note only
  when the note stands alone.
- ``-O json``: mypy's objects, one a line, each with ``"configurations"``:
  the names of the configurations it occurs in, all of them when it
  occurs in every one, in the order they were given.
- the summary, unless ``--no-error-summary`` or ``-O json``:
  ``Found 1 error in 2 configurations (sp, no_sp)``, ``Success: no issues
  found in 1 configuration (no_sp)``, coloured as mypy colours its own.
- ``--junit-xml`` (with ``--junit-format``): one report of the merged
  diagnostics, written by mypy's writer, so a failure is counted as mypy
  counts it (one test case for the run, or one a file with
  ``per_file``).
"""

from __future__ import annotations

import json
import sys
from typing import Iterable, Iterator, Literal

from mypy.cache import ErrorTuple
from mypy.errors import Errors
from mypy.main import maybe_write_junit_xml
from mypy.options import Options
from mypy.util import FancyFormatter, plural_s, read_py_file

from spmd_mypy.configurations.merge import Diagnostic

Merged = list[tuple[Diagnostic, list[str]]]

_TOP_LEVEL = "At top level:"
"""mypy's ``--show-error-context`` note for diagnostics outside any function or class."""


class Report:
    """The merged diagnostics of ``configurations`` (their names, in order), in mypy's ``options``' form."""

    def __init__(self, options: Options, configurations: list[str]) -> None:
        self.options = options
        self.configurations = configurations
        self.formatter = FancyFormatter(sys.stdout, sys.stderr, options.hide_error_codes,
                                        hide_success=bool(options.output))

    def by_file(self, merged: Merged) -> dict[str, list[str]]:
        """Each file's lines, in the order mypy gave the files, uncoloured."""
        files: dict[str, Merged] = {}
        for diagnostic, occurs in merged:
            files.setdefault(diagnostic.file, []).append((diagnostic, occurs))
        render = self._json if self.options.output else self._text
        return {file: render(file, entries) for file, entries in files.items()}

    def coloured(self, line: str) -> str:
        """A text line as mypy would print it to this terminal (JSON stays plain for its readers)."""
        return self.formatter.colorize(line) if self.options.color_output and not self.options.output else line

    def summary(self, errors: int) -> str | None:
        """The last line, where mypy would write one."""
        if self.options.output or not self.options.error_summary:
            return None
        count = len(self.configurations)
        where = f"{count} configuration{plural_s(count)} ({', '.join(self.configurations)})"
        if errors:
            return self._styled(f"Found {errors} error{plural_s(errors)} in {where}", "red")
        return self._styled(f"Success: no issues found in {where}", "green")

    def write_junit_xml(self, seconds: float, by_file: dict[str, list[str]], stopped: list[str]) -> None:
        """``--junit-xml``'s report, if asked for: the merged lines, and what mypy said where it stopped
        (which makes the report's one test case an error, as mypy's own does)."""
        messages: dict[str | None, list[str]] = {file: lines for file, lines in by_file.items()}
        if stopped:
            messages[None] = stopped
        every = [line for lines in messages.values() for line in lines]
        maybe_write_junit_xml(seconds, bool(stopped), every, messages, self.options)

    def _styled(self, line: str, colour: Literal["red", "green"]) -> str:
        return self.formatter.style(line, colour, bold=True) if self.options.color_output else line

    def _text(self, file: str, entries: Merged) -> list[str]:
        rendered: list[ErrorTuple] = []
        for diagnostic, occurs in _with_context(entries, self.configurations):
            label = "" if len(occurs) == len(self.configurations) else f"[{', '.join(occurs)}] "
            place = (diagnostic.file, diagnostic.line, diagnostic.column, diagnostic.end_line, diagnostic.end_column)
            rendered.append((*place, diagnostic.severity, label + diagnostic.message, diagnostic.code))
            rendered += [(*place, "note", hint, None) for hint in _hints(diagnostic)]
        source = read_py_file(file, _read_bytes) if self.options.pretty else None
        lines = Errors(self.options).format_messages_default(rendered, source)
        return self.formatter.fit_in_terminal(lines) if self.options.pretty else lines

    def _json(self, file: str, entries: Merged) -> list[str]:
        return [json.dumps({**diagnostic.fields(), "configurations": occurs})
                for diagnostic, occurs in _with_context(entries, self.configurations)]


def _with_context(entries: Merged, configurations: list[str]) -> Iterator[tuple[Diagnostic, list[str]]]:
    """One file's diagnostics, each after ``--show-error-context``'s note where its context differs
    from the one before (a note of where, in every configuration: never labelled)."""
    shown = _TOP_LEVEL
    for diagnostic, occurs in entries:
        context = diagnostic.context or _TOP_LEVEL
        if context != shown:
            yield Diagnostic(diagnostic.file, -1, -1, -1, -1, context, None, None, "note"), configurations
            shown = context
        yield diagnostic, occurs


def _hints(diagnostic: Diagnostic) -> Iterable[str]:
    """The notes mypy attached to a diagnostic (its JSON joins them with newlines)."""
    return diagnostic.hint.split("\n") if diagnostic.hint else ()


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as source:
        return source.read()
