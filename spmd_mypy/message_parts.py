"""An SPMD message in mypy's shape: a short error line, the explanation and the fix as notes.

The algebra and the plugin write each message as one text (the runtime
shim raises it whole); the plugin reports it in three parts, split at fixed
markers:

* the **fix**: from ``Fix:`` (or ``Fix (needs your choice):``) to the end;
* the **headline**: what is wrong, on which axis, with which types -- the
  statement before the fix up to its first separator (``; ``, ``: ``,
  ``. ``, ``, but ``, ``, so ``) that stands outside brackets and quotes
  and follows the first mention of an axis (``axis tp``), else of a type
  (``P@tp``), else a malformed annotation's ``Bad SPMD annotation: ``
  prefix;
* the **explanation**: the rest of the statement, after that separator.

A message without a separator after its axis is all headline.  Only the
separator is dropped: the three parts are the message, cut.

>>> parts_of("add adds a Partial on axis tp (P@tp + R@tp); the R@tp term counts once per rank. Fix: all_reduce(x).")
Parts(headline='add adds a Partial on axis tp (P@tp + R@tp)', explanation='the R@tp term counts once per rank.', fix='Fix: all_reduce(x).')
>>> parts_of("Bad SPMD annotation: 'R@(dp, tp)': only a shard spans several axes")
Parts(headline="Bad SPMD annotation: 'R@(dp, tp)'", explanation='only a shard spans several axes', fix='')
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FIX = re.compile(r"(?:^|(?<= ))Fix(?: \(needs your choice\))?: ")
_MENTIONS = (re.compile(r"\baxis \w"), re.compile("@"), re.compile(r"^Bad SPMD [a-z ]+: "))
_SEPARATORS = ("; ", ": ", ". ", ", but ", ", so ")
_ABBREVIATIONS = ("e.g. ", "i.e. ")
_OPENING, _CLOSING, _QUOTES = "([{", ")]}", "'`\""


@dataclass(frozen=True)
class Parts:
    """A message's error line, its explanation ("" if none) and its fix sentence ("" if none)."""

    headline: str
    explanation: str
    fix: str


def parts_of(message: str) -> Parts:
    """``message`` split as the module says."""
    statement, fix_sentence = _statement_and_fix(message)
    mention = next((found for pattern in _MENTIONS if (found := pattern.search(statement))), None)
    cut = _separator_after(statement, mention.end()) if mention else None
    if cut is None:
        return Parts(statement.rstrip("."), "", fix_sentence)
    start, separator = cut
    return Parts(statement[:start], statement[start + len(separator):], fix_sentence)


def _separator_after(text: str, start: int) -> tuple[int, str] | None:
    """The position and text of the first separator in ``text`` from ``start``, outside brackets and quotes."""
    depth, quote = 0, ""
    for position, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in _QUOTES and not (char == "'" and text[position - 1:position].isalnum()):
            quote = char
        elif char in _OPENING or char in _CLOSING:
            depth += 1 if char in _OPENING else -1
        elif position >= start and depth == 0:
            found = next((s for s in _SEPARATORS if text.startswith(s, position)), None)
            if found and not any(text.endswith(a[:-1], 0, position + 1) for a in _ABBREVIATIONS):
                return position, found
    return None


def with_explanation(message: str, explanation: str) -> str:
    """``message`` with ``explanation`` added at the end of its statement, before its fix.

    >>> with_explanation("x is P@tp on axis tp. Fix: all_reduce(x).", "y needs R")
    'x is P@tp on axis tp; y needs R. Fix: all_reduce(x).'
    """
    statement, fix_sentence = _statement_and_fix(message)
    return f"{statement.rstrip('.')}; {explanation}. {fix_sentence}".strip()


def _statement_and_fix(message: str) -> tuple[str, str]:
    """What ``message`` says is wrong, and its fix sentence ('' if none), each stripped."""
    fix = _FIX.search(message)
    return (message[:fix.start()].strip(), message[fix.start():].strip()) if fix else (message.strip(), "")
