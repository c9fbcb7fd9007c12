"""Turning the algebra's errors into mypy diagnostics."""

from __future__ import annotations

from typing import Sequence

from mypy.errorcodes import ErrorCode
from mypy.nodes import Context
from mypy.plugin import CheckerPluginInterface, TypeAnalyzerPluginInterface

from spmd_mypy import errorcodes, fixes
from spmd_mypy.build_state import state_of
from spmd_mypy.fixes import Operand
from spmd_mypy.message_parts import parts_of
from spmd_mypy.sources import SourceUnreadable
from spmd_mypy.spmd_types_api.spelling import in_spmd_types_spelling, speaks_spmd_types
from spmd_stubs.core import Code, SpmdTypeError
from spmd_stubs.core.errors import plainly_a_choice

_MAX_SNIPPET = 60


def snippet(api: CheckerPluginInterface, node: Context) -> str | None:
    """The source text of ``node`` (shortened), None where it cannot be read."""
    try:
        text = " ".join(state_of(api).sources.text_of(api.tree, node).split())  # type: ignore[attr-defined]
    except (SourceUnreadable, AttributeError):
        return None
    text = balanced(text)
    return text if len(text) <= _MAX_SNIPPET else text[: _MAX_SNIPPET - 3] + "..."


def balanced(text: str) -> str:
    """``text`` with the opening parentheses its positions leave out.

    mypy places a binary expression at its left operand, which for
    ``(1 - s) * x`` starts after the parenthesis: the snippet would read
    ``1 - s) * x``.
    """
    depth = missing = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        missing = max(missing, -depth)
    return "(" * missing + text


def fail(api: CheckerPluginInterface, node: Context, message: str, code: ErrorCode,
         error: SpmdTypeError | None = None, operands: Sequence[Operand] = (), edit: str | None = None) -> None:
    """Report ``message`` at ``node`` in mypy's shape (:mod:`spmd_mypy.message_parts`): the error line
    is its headline; notes on the same line follow it, attached to it (ignored and deduplicated with
    it): ``In `source`: `` with the explanation, then the fix sentence, then with ``show_fixes``
    the fix as an edit.

    The fix is ``error``'s rewrite, where it has one, else a choice (said so in the fix sentence, and
    in the edit note).  An algebra verdict's message says so already
    (:class:`~spmd_stubs.core.SpmdTypeError`); the plugin's own messages are said so here, except one
    whose fix the caller has checked and gives as ``edit`` (the note, ``Fix as an edit: ...``)."""
    module = getattr(api, "tree", None)
    if module is not None and node.line in state_of(api).quiet_lines.get(module.fullname, ()):
        return  # a ``with spmd.no_typecheck():`` block (spmd_mypy.spmd_types_api.unchecked)
    if error is None and edit is None and code is not errorcodes.BY_RULE[Code.ANNOTATION]:
        message = plainly_a_choice(message)
    parts = parts_of(message)
    reported = api.msg.fail(parts.headline, node, code=code)
    notes = [placed(snippet(api, node), parts.explanation), parts.fix]
    if state_of(api).settings.show_fixes:
        notes.append(edit or (fixes.note(api, node, error, operands) if error is not None else fixes.NO_EDIT))
    for note in filter(None, notes):
        api.msg.note(note, node, code=code, parent_error=reported)


def fail_in_annotation(api: TypeAnalyzerPluginInterface, node: Context, message: str) -> None:
    """Report a malformed annotation found while analysing types, in the same shape as :func:`fail`
    (no source snippet: the annotation is the line itself)."""
    parts = parts_of(message)
    code = errorcodes.BY_RULE[Code.ANNOTATION]
    api.fail(parts.headline, node, code=code)
    for note in filter(None, (parts.explanation, parts.fix)):
        api.note(note, node, code=code)  # type: ignore[attr-defined]


def placed(source: str | None, explanation: str) -> str:
    """The note that names the expression a message is about, with the explanation ('' if neither).

    >>> placed("a * b", "a product of pending sums is not the sum of products.")
    'In `a * b`: a product of pending sums is not the sum of products.'
    """
    if source is None:
        return explanation
    return f"In `{source}`: {explanation}" if explanation else f"In `{source}`"


def rule_error(api: CheckerPluginInterface, node: Context, error: SpmdTypeError, operands: Sequence[Operand] = ()) -> None:
    """Report an algebra verdict: the message already names the axis, operand types and fix.

    ``operands`` are the failing op's operands (with their types on the
    error's axis), where the fix may rewrite one of them.  In a module
    written for spmd_types the fix is in its spelling
    (:mod:`spmd_mypy.spmd_types_api.spelling`).
    """
    if speaks_spmd_types(getattr(api, "tree", None)):
        error = in_spmd_types_spelling(error, f'"{error.axis}"')
    fail(api, node, error.message, errorcodes.BY_RULE[error.code], error, operands)
