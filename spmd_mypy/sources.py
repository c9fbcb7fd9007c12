"""The source text behind mypy's trees: what annotations are read back from and messages quote.

mypy keeps no operands of ``@`` inside a type expression and no text of any
expression, only positions; :class:`SourceFiles` reads the text at a node's
positions, each file once per parse.

On a line with non-ASCII text mypy's columns are not character indices: its
old parser (``--no-native-parser``) counts UTF-8 bytes, as Python's ``ast``
does, and its native parser (mypy 2.x's default) counts each character once
and then takes off each extra byte of a multi-byte character before it again
(``é`` one column less, ``€`` two).  :func:`character_index` turns either
into the index of the character, which is what text is sliced by and what a
fix edit's columns count.
"""

from __future__ import annotations

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

    def forget(self, module: MypyFile) -> None:
        """``module`` was parsed anew: read its text again when it is next quoted.

        mypy's daemon merges an edited module's new tree into the old tree
        object, so the tree's identity does not say that the text changed.
        """
        self._read.pop(module.path, None)

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
        lines = self.lines(module)[node.line - 1 : end_line]
        if not lines:
            raise SourceUnreadable("the position is past the file's end")
        start, end = self.index(lines[0], node.column), self.index(lines[-1], end_column)
        if len(lines) == 1:
            return lines[0][start:end]
        return "\n".join([lines[0][start:], *lines[1:-1], lines[-1][:end]])

    def index(self, line: str, column: int) -> int:
        """The index in ``line`` of the character at mypy's ``column``."""
        return character_index(line, column, self.native_parser)
