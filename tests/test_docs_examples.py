"""Every documented program and command with its output: the output is what really runs.

README.md and docs/*.md show three kinds of checked blocks:

* A ``python`` block followed by a plain block starting ``t.py:`` is a
  program and what mypy with the plugin prints for it under the recommended
  config (with ``show_fixes`` where the output shows a fix as an edit, with
  ``strict`` where it shows a strict-only code).  The programs of one setting
  are checked by one mypy run, each as its own module, its path printed as
  ``t.py``; the docs wrap long lines, so whitespace is compared loosely.
* A ``console`` block: each ``$ command`` runs (bash, the repository's
  ``.venv`` first on the PATH) in a scratch directory holding the page's
  files and links to the repository's top-level directories, one page's
  blocks in order in the same directory; the lines after it are what it
  prints (stdout and stderr, as they reach one pipe: redirect one of them
  where a command writes both),
  and it must exit 0 (a failure the page wants to show is written
  ``... || echo "exit status $?"``).
* A block right after ``<!-- file: NAME -->`` is the file NAME of that
  scratch directory, written before the page's commands run.

A block right after ``<!-- excerpt -->`` is not run (a fragment, or a
session on paths that do not exist here); one after ``<!-- checked by PATH
-->`` is compared by that test.  Every console block, and every plain block
that looks like a tool's output (a ``file.py:LINE:`` diagnostic, an
exception), is one of these: nothing that shows output goes unchecked.
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

import pytest

from tests.plugin.harness import ROOT, config_text, run_mypy

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<text>.*?)^```[ \t]*$", re.S | re.M)
MARKER = re.compile(r"<!--\s*(?P<marker>[^>]*?)\s*-->\s*\Z")
LOOKS_LIKE_OUTPUT = re.compile(r"\A(?:[\w./-]+\.py:\d+:|\$ |Traceback|\w*(?:Error|Exception)\b)")
LINKED = ("spmd_mypy", "tests", "examples", "docs", "scripts")
"""The repository's directories a page's commands may name, linked into the scratch directory.

Not ``spmd_stubs``: mypy would find it there, at a path that changes from run
to run, instead of where it is installed."""


@dataclass(frozen=True)
class Block:
    doc: str
    number: int  # its position among the page's fenced blocks
    info: str
    text: str
    marker: str  # the HTML comment right before the fence, "" if none
    glued: bool  # only whitespace since the previous block

    @property
    def name(self) -> str:
        return f"{self.doc}#{self.number}"


@lru_cache(maxsize=None)
def _blocks(doc: Path) -> tuple[Block, ...]:
    text = doc.read_text()
    found, end = [], 0
    for number, match in enumerate(FENCE.finditer(text)):
        before = text[end:match.start()]
        marker = MARKER.search(before)
        found.append(Block(doc.name, number, match["info"].strip(), match["text"], marker["marker"] if marker else "",
                           number > 0 and not before.strip()))
        end = match.end()
    return tuple(found)


def _all_blocks() -> list[Block]:
    return [block for doc in DOCS for block in _blocks(doc)]


# --------------------------------------------------------------------------
# Programs and what mypy prints for them
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Program:
    name: str
    source: str
    output: str
    output_name: str  # the output block's name

    @property
    def settings(self) -> tuple[tuple[str, bool], ...]:
        """The ``[spmd_mypy]`` settings only the documented output's diagnostics print with."""
        strict_codes = ("spmd-untyped-boundary", "spmd-unmodelled")
        return (("show_fixes", "Fix as an edit" in self.output),
                ("strict", any(f"[{code}]" in self.output for code in strict_codes)))


def _programs() -> list[Program]:
    programs = []
    for doc in DOCS:
        blocks = _blocks(doc)
        for before, block in zip(blocks, blocks[1:]):
            if before.info == "python" and block.info == "" and block.glued and block.text.startswith("t.py:"):
                programs.append(Program(before.name, before.text, block.text, block.name))
    return programs


PROGRAMS = _programs()


def _lock(cache: Path) -> int:
    """Serialise the runs on the shared cache (xdist's workers share it); released when the fd closes."""
    fd = os.open(cache / "lock", os.O_CREAT | os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


@lru_cache(maxsize=None)
def _checked(settings: tuple[tuple[str, bool], ...], cache: Path) -> dict[str, str]:
    """One mypy run over every program of these settings: each program's output, its path printed as t.py."""
    group = [p for p in PROGRAMS if p.settings == settings]
    scratch = Path(tempfile.mkdtemp(prefix="docs-programs-"))
    modules = {f"doc_{number}": program for number, program in enumerate(group)}
    for module, program in modules.items():
        (scratch / f"{module}.py").write_text(program.source)
    config = scratch / "mypy.ini"
    config.write_text(config_text("[spmd_mypy]\n" + "".join(f"{key} = true\n" for key, on in settings if on)))
    fd = _lock(cache)
    try:
        printed = run_mypy([Path(f"{module}.py") for module in modules], config, cache, cwd=scratch)
    finally:
        os.close(fd)
    outputs = dict.fromkeys((program.name for program in group), "")
    for line in printed.splitlines(keepends=True):
        module, _, rest = line.partition(".py:")
        if module in modules:
            outputs[modules[module].name] += "t.py:" + rest
    return outputs


@pytest.fixture(scope="module")
def shared_cache(kept_dir: Callable[[str], Path]) -> Path:
    return kept_dir("docs-examples-mypy")


def _words(text: str) -> list[str]:
    return text.split()


def test_the_docs_show_checked_examples() -> None:
    assert {program.name.partition("#")[0] for program in PROGRAMS} >= {"README.md", "global.md"}
    assert {block.doc for block in _all_blocks() if block.info == "console" and block.marker != "excerpt"} \
        >= {"checker.md", "migrate.md"}


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_documented_output_is_the_checkers(program: Program, shared_cache: Path) -> None:
    printed = _checked(program.settings, shared_cache)[program.name]
    assert _words(printed) == _words(program.output), printed


# --------------------------------------------------------------------------
# Commands and what they print
# --------------------------------------------------------------------------


def _session(text: str) -> list[tuple[str, str]]:
    """A console block's ``(command, output)`` pairs; a command line ending in a backslash goes on."""
    pairs: list[tuple[str, str]] = []
    continued = False
    for line in text.splitlines(keepends=True):
        if continued or line.startswith("$ "):
            command = line if continued else line[2:]
            if continued:
                pairs[-1] = (pairs[-1][0] + command, "")
            else:
                pairs.append((command, ""))
            continued = line.rstrip("\n").endswith("\\")
        elif pairs:
            pairs[-1] = (pairs[-1][0], pairs[-1][1] + line)
    return pairs


CONSOLE_DOCS = sorted({block.doc for block in _all_blocks() if block.info == "console" and block.marker != "excerpt"})


@pytest.mark.parametrize("doc", CONSOLE_DOCS)
def test_documented_commands_print_what_the_page_says(doc: str, tmp_path: Path, shared_cache: Path) -> None:
    blocks = _blocks(next(d for d in DOCS if d.name == doc))
    for name in LINKED:
        (tmp_path / name).symlink_to(ROOT / name)
    for block in blocks:
        if block.marker.startswith("file:"):
            (tmp_path / block.marker.partition(":")[2].strip()).write_text(block.text)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "MYPY_FORCE_COLOR": "0", "MYPY_CACHE_DIR": str(shared_cache), "TERM": "dumb"}
    fd = _lock(shared_cache)
    try:
        for block in blocks:
            if block.info != "console" or block.marker == "excerpt":
                continue
            for command, output in _session(block.text):
                done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
                assert done.returncode == 0, f"{block.name}: $ {command}exit {done.returncode}:\n{done.stdout}"
                assert _words(done.stdout) == _words(output), f"{block.name}: $ {command}{done.stdout}"
    finally:
        os.close(fd)


# --------------------------------------------------------------------------
# Nothing that shows output goes unchecked
# --------------------------------------------------------------------------


def test_every_block_that_shows_output_is_checked_or_an_excerpt() -> None:
    paired = {program.output_name for program in PROGRAMS}
    unchecked, bad_markers = [], []
    for block in _all_blocks():
        marker = block.marker
        if marker and not (marker == "excerpt" or re.fullmatch(r"file: \S+", marker)
                           or (marker.startswith("checked by ") and _names_the_page(marker, block.doc))):
            bad_markers.append(f"{block.name}: <!-- {marker} -->")
        # A console block without a marker is run (test_documented_commands_print_what_the_page_says).
        shows_output = block.info in ("", "text") and LOOKS_LIKE_OUTPUT.match(block.text)
        if shows_output and not marker and block.name not in paired:
            unchecked.append(f"{block.name}: {block.text.splitlines()[0][:80]}")
    assert bad_markers == [], "a marker that is not <!-- excerpt -->, <!-- file: NAME --> or a test naming the page"
    assert unchecked == [], "run it (a console block, or a program's t.py output) or mark it <!-- excerpt -->"


def _names_the_page(marker: str, doc: str) -> bool:
    """``checked by PATH``: PATH is a test file that reads this page."""
    test = ROOT / marker.removeprefix("checked by ").strip()
    return test.is_file() and doc in test.read_text()
