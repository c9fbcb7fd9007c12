"""The source text behind mypy's trees: what annotations are read back from and messages quote.

mypy keeps no operands of ``@`` inside a type expression and no text of any
expression, only positions; :class:`SourceFiles` reads the text at a node's
positions, each file once per parse.

On a line with non-ASCII text mypy's columns are not character indices: its
old parser (``--no-native-parser``, the default before mypy 2.4) counts UTF-8
bytes, as Python's ``ast`` does, and its native parser counts each character once
and then takes off each extra byte of a multi-byte character before it again
(``é`` one column less, ``€`` two).  :func:`character_index` turns either
into the index of the character, which is what text is sliced by and what a
fix edit's columns count.

The old parser also places every node of an annotation on the annotation's
first line (each at its own column), and ends only some of them:
:meth:`SourceFiles.subscript_items` reads an item of a subscript there.
"""

from __future__ import annotations

import ast
from typing import NamedTuple

from mypy.nodes import Context, MypyFile


class SourceUnreadable(Exception):
    """A node's text cannot be read: no positions, or the file is gone."""


def character_index(line: str, column: int, native_parser: bool) -> int:
    """The index in ``line`` of the character mypy places at ``column`` (the module docstring's units)."""
    if line.isascii():
        return column
    if native_parser:
        index, counted = column, _native_column(line, column)
        while counted < column and index < len(line):
            index += 1
            counted = _native_column(line, index)
        return index
    return len(line.encode("utf-8")[:column].decode("utf-8", errors="ignore"))


def _native_column(line: str, index: int) -> int:
    """The native parser's column of ``line[index]``: the index, less the extra bytes before it."""
    return 2 * index - len(line[:index].encode("utf-8"))


class SourceFiles:
    """The lines of each file mypy parsed, read once per parse (no stat per call).

    A build's plugin state holds one (:class:`spmd_mypy.build_state.BuildState`);
    a tool reading a finished run's trees makes its own.  ``native_parser``:
    whether mypy's native parser made the trees (mypy's option of that name).
    """

    def __init__(self, native_parser: bool = True) -> None:
        self.native_parser = native_parser
        self._read: dict[str, tuple[MypyFile, list[str]]] = {}
        self._subscripts: dict[str, tuple[MypyFile, dict[tuple[int, int], _Subscript]]] = {}

    def forget(self, module: MypyFile) -> None:
        """``module`` was parsed anew: read its text again when it is next quoted.

        mypy's daemon merges an edited module's new tree into the old tree
        object, so the tree's identity does not say that the text changed.
        """
        self._read.pop(module.path, None)
        self._subscripts.pop(module.path, None)

    def lines(self, module: MypyFile) -> list[str]:
        """The lines of the file mypy parsed into ``module``."""
        cached = self._read.get(module.path)
        if cached is None or cached[0] is not module:
            try:
                with open(module.path, encoding="utf-8") as handle:
                    cached = (module, handle.read().splitlines())
            except OSError as error:
                raise SourceUnreadable(f"cannot read {module.path} ({error})") from error
            self._read[module.path] = cached
        return cached[1]

    def text_of(self, module: MypyFile, node: Context) -> str:
        """The source text of ``module`` between ``node``'s start and end positions."""
        end_line, end_column = node.end_line, node.end_column
        if node.line < 1 or node.column < 0 or end_line is None or end_column is None:
            raise SourceUnreadable("no end position")
        lines = self.lines(module)
        if node.line > len(lines):
            raise SourceUnreadable("the position is past the file's end")
        return _between(lines, (node.line, node.column, min(end_line, len(lines)), end_column), self.native_parser)

    def subscript_items(self, module: MypyFile, subscript: Context) -> list[str]:
        """The source text of each item of the subscript (``x[a, b]``) that ends where ``subscript`` ends.

        For a tree of mypy's old parser, which gives an annotation's subscript
        its true end (a line and a UTF-8 byte column, as Python's ``ast`` does)
        but neither the true line nor any end of an item it cannot make a type
        of (``R@tp``): the end finds the subscript in the ``ast`` of the file,
        which gives each item's extent.  A subscript that starts before
        ``subscript``'s line is not the one meant: a quoted annotation's
        positions count from the start of the string.
        """
        end_line, end_column = subscript.end_line, subscript.end_column
        if end_line is None or end_column is None:
            raise SourceUnreadable("no end position")
        found = self._subscripts_of(module).get((end_line, end_column))
        if found is None or found.line < subscript.line:
            raise SourceUnreadable("no subscript ends there")
        lines = self.lines(module)
        return [_between(lines, item, native_parser=False) for item in found.items]

    def _subscripts_of(self, module: MypyFile) -> dict[tuple[int, int], _Subscript]:
        """:func:`_subscripts_in` the file of ``module``, parsed once per parse."""
        cached = self._subscripts.get(module.path)
        if cached is None or cached[0] is not module:
            cached = (module, _subscripts_in("\n".join(self.lines(module)), module.path))
            self._subscripts[module.path] = cached
        return cached[1]

    def index(self, line: str, column: int) -> int:
        """The index in ``line`` of the character at mypy's ``column``."""
        return character_index(line, column, self.native_parser)


_Place = tuple[int, int, int, int]
"""A node's (line, column, end line, end column): from Python's ``ast``, columns in UTF-8 bytes."""


class _Subscript(NamedTuple):
    """A subscript as Python's ``ast`` places it: its first line, and each item's place."""

    line: int
    items: list[_Place]


def _subscripts_in(text: str, path: str) -> dict[tuple[int, int], _Subscript]:
    """Every subscript of a module's ``text``, by its end (line, UTF-8 byte column)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as error:
        raise SourceUnreadable(f"Python cannot parse {path} ({error})") from error
    found: dict[tuple[int, int], _Subscript] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            _, _, end_line, end_column = _place(node)
            found[end_line, end_column] = _Subscript(node.lineno, [_place(item) for item in items])
    return found


def _place(node: ast.expr) -> _Place:
    end_line, end_column = node.end_lineno, node.end_col_offset
    assert end_line is not None and end_column is not None  # ast.parse ends every expression
    return node.lineno, node.col_offset, end_line, end_column


def _between(lines: list[str], place: _Place, native_parser: bool) -> str:
    """The text of ``lines`` at ``place`` (1-based lines; columns in the units of the parser that gave them)."""
    line, column, end_line, end_column = place
    first, last = lines[line - 1], lines[end_line - 1]
    start, end = character_index(first, column, native_parser), character_index(last, end_column, native_parser)
    if line == end_line:
        return first[start:end]
    return "\n".join([first[start:], *lines[line : end_line - 1], last[:end]])
