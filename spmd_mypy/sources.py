"""The source text behind mypy's trees: what annotations are read back from and messages quote.

mypy keeps no operands of ``@`` inside a type expression and no text of any
expression, only positions; :class:`SourceFiles` reads the text at a node's
positions, each file once per parse.
"""

from __future__ import annotations

from mypy.nodes import Context, MypyFile


class SourceUnreadable(Exception):
    """A node's text cannot be read: no positions, or the file is gone."""


class SourceFiles:
    """The lines of each file mypy parsed, read once per parse (no stat per call).

    A build's plugin state holds one (:class:`spmd_mypy.build_state.BuildState`);
    a tool reading a finished run's trees makes its own.
    """

    def __init__(self) -> None:
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
        if len(lines) == 1:
            return lines[0][node.column : end_column]
        return "\n".join([lines[0][node.column :], *lines[1:-1], lines[-1][:end_column]])
