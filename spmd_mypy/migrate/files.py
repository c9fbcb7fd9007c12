"""The files spmd-migrate reads and writes: their text exactly, the diff ``git apply`` takes, and where copies go.

A source is read in the encoding Python would read it in (a PEP 263
coding line or a byte-order mark, else UTF-8) with its line endings as they
are (``\\r\\n`` stays), and rewritten the same way: a rewritten file differs
only in the lines the codemod changed, which is also what its diff says.

``--output-dir`` copies keep their paths below the directory the PATHs
share (:func:`output_base`), so a package keeps its layout whether it is
given as a directory or file by file, and two files never share a copy.
"""

from __future__ import annotations

import difflib
import os
import re
import tokenize
from pathlib import Path
from typing import Iterator, Sequence

__all__ = ["read_source", "rewrite_source", "unified_diff", "output_base"]

_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")
"""A line as git and patch count them: up to and with ``\\n`` (``\\r``, form feeds and the like stay inside)."""


def _encoding(path: Path) -> str:
    with open(path, "rb") as handle:
        return tokenize.detect_encoding(handle.readline)[0]


def read_source(path: Path) -> str:
    """The text of a Python file, decoded as Python decodes it, line endings untouched.

    OSError, UnicodeDecodeError or (for a bad coding line) SyntaxError when it cannot be read.
    """
    with open(path, encoding=_encoding(path), newline="") as handle:
        return handle.read()


def rewrite_source(path: Path, text: str) -> None:
    """Replace the text of the Python file ``path`` by ``text``, as it is, in the file's encoding."""
    encoding = _encoding(path)
    with open(path, "w", encoding=encoding, newline="") as handle:
        handle.write(text)


def unified_diff(original: str, code: str, shown: str) -> Iterator[str]:
    """The unified diff of ``original`` -> ``code``, with git's ``a/``, ``b/`` prefixes on the path ``shown``.

    Lines end at ``\\n`` only, and a last line without one is followed by
    ``\\ No newline at end of file``, as ``git apply`` and ``patch`` expect.
    """
    for line in difflib.unified_diff(_LINE.findall(original), _LINE.findall(code),
                                     fromfile=f"a/{shown}", tofile=f"b/{shown}"):
        yield line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"


def _import_base(path: Path, roots: Sequence[Path]) -> Path:
    """The directory the imports of ``path`` (a file, or a directory taken whole) start from.

    The ``--root`` it lies under, else the directory above its top-level
    package (walking up from its parent while that has an ``__init__.py``).
    """
    for root in roots:
        if path.is_relative_to(root):
            return root
    directory = path.parent
    while (directory / "__init__.py").is_file():
        directory = directory.parent
    return directory


def output_base(paths: Sequence[Path], roots: Sequence[Path] = ()) -> Path:
    """The directory ``--output-dir`` mirrors: the one the PATHs' import bases share.

    A copy of ``FILE`` goes to ``DIR / FILE.relative_to(base)``:
    ``--output-dir out site-packages/fairscale`` writes ``out/fairscale/...``,
    ``--output-dir out src/pkg/a.py src/pkg/sub/b.py`` writes
    ``out/pkg/a.py`` and ``out/pkg/sub/b.py``.
    """
    absolute_roots = [Path(os.path.abspath(root)) for root in roots]
    bases = {_import_base(Path(os.path.abspath(path)), absolute_roots) for path in paths}
    return Path(os.path.commonpath(sorted(bases)))
