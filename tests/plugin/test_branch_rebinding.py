"""A parameter rebound in a branch that returns keeps its own type after the branch (spmd_mypy.rebinding).

mypy alone leaks the rebinding under ``allow_redefinition`` (the first test:
when it fails, mypy fixed it and the rewrite is dead code, to delete with
its docs paragraph); the plugin, which chose ``allow_redefinition``, rewrites
the rebinding (tests/plugin/cases/robustness/branch_rebinding.py) where the
new value can reach nothing after the branch, and nowhere else (the rules
below, on parsed trees); a rewritten module is rewritten again when mypy
re-checks it only because an import changed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mypy.errors import Errors
from mypy.nodes import AssignmentStmt, MypyFile, NameExpr
from mypy.options import Options
from mypy.parse import load_from_raw, parse
from mypy.server.subexpr import get_subexpressions

from spmd_mypy import parse_rewrites, rebinding
from spmd_mypy.sources import SourceFiles
from spmd_mypy.statements import walk
from tests.plugin.conftest import MypyRuns
from tests.plugin.harness import case_files, parse_output, run_mypy

MYPY_ALONE = """\
from typing import Any, Generic, TypeVar
T = TypeVar("T")
class Box(Generic[T]): ...

def ident(t: Box[int]) -> Box[str]:
    return Box()

def gather(t: Box[bytes]) -> Box[str]:
    return Box()

def col(inp: Box[Any], flag: bool) -> Box[str]:
    if flag:
        inp = ident(inp)
        return inp
    reveal_type(inp)
    return gather(inp)
"""


@pytest.mark.parametrize("redefinition", [True, False])
def test_mypy_alone_leaks_a_rebinding_out_of_a_branch_that_returns(redefinition: bool, tmp_path: Path) -> None:
    """Plain mypy, no plugin: ``inp`` after the ``if`` is the parameter, yet typed with the rebinding."""
    (tmp_path / "leak.py").write_text(MYPY_ALONE)
    flags = ["--allow-redefinition"] if redefinition else []
    command = [sys.executable, "-m", "mypy", "--config-file", "", "--cache-dir", str(tmp_path / "cache"),
               "--no-error-summary", *flags, "leak.py"]
    output = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300).stdout
    leaked = ('leak.py:15: note: Revealed type is "leak.Box[Any] | leak.Box[str]"' in output
              and 'leak.py:16: error: Argument 1 to "gather" has incompatible type "Box[Any] | Box[str]"' in output)
    assert leaked == redefinition, output


def _parsed(source: str, native_parser: bool = True, path: str = "m.py") -> MypyFile:
    options = Options()
    options.native_parser = native_parser
    errors = Errors(options)
    tree = parse(source.encode(), path, "m", errors, options)
    if tree.raw_data is not None:  # the native parser's tree comes serialised
        tree = load_from_raw(path, "m", tree.raw_data, errors, options)
    assert isinstance(tree, MypyFile)
    return tree


def _rewritten(source: str, native_parser: bool = True) -> list[str]:
    """The source's lines as the rewrite leaves the tree: each shadow written with its suffix, each copy
    (``x' = x``, put at the rebinding's position) on a line of its own before the rebinding's."""
    tree = _parsed(source, native_parser)
    rebinding._rewrite(tree, lambda: True)
    lines = source.splitlines()
    copies = {s.line: s for v in walk(tree.defs) if isinstance(s := v.statement, AssignmentStmt)
              and isinstance(s.rvalue, NameExpr) and (s.rvalue.line, s.rvalue.column) == (s.line, s.column)
              and isinstance(s.lvalues[0], NameExpr) and s.lvalues[0].name.endswith(rebinding.SUFFIX)}
    in_copies = {id(copy.rvalue) for copy in copies.values()}
    shadows = sorted({(e.line, e.column, e.name) for e in get_subexpressions(tree) if isinstance(e, NameExpr)
                      and e.name.endswith(rebinding.SUFFIX) and id(e) not in in_copies}, reverse=True)
    for line, column, name in shadows:
        text, bare = lines[line - 1], name.rstrip(rebinding.SUFFIX)
        lines[line - 1] = text[:column] + name + text[column + len(bare):]
    for line in sorted(copies, reverse=True):
        copy = copies[line]
        assert isinstance(copy.rvalue, NameExpr) and isinstance(copy.lvalues[0], NameExpr)
        lines.insert(line - 1, " " * copy.column + f"{copy.lvalues[0].name} = {copy.rvalue.name}")
    return lines


RETURNED = """\
def f(x: T, y: T, flag: bool) -> T:
    if flag:
        log(x)
        x = g(x)
        x = h(x, y)
        return x
    return x
"""


@pytest.mark.parametrize("native_parser", [True, False])
def test_the_rebinding_and_what_follows_it_in_the_branch_are_the_shadows(native_parser: bool) -> None:
    assert _rewritten(RETURNED, native_parser) == [
        "def f(x: T, y: T, flag: bool) -> T:",
        "    if flag:",
        "        log(x)",
        "        x' = x",
        "        x' = g(x)",
        "        x' = h(x', y)",
        "        return x'",
        "    return x",
    ]


@pytest.mark.parametrize(("name", "source"), [
    ("raise", "def f(x: T, flag: bool) -> T:\n    if flag:\n        x = g(x)\n        raise E(x)\n    return x\n"),
    ("else", "def f(x: T, flag: bool) -> T:\n    if flag:\n        pass\n    else:\n        x = g(x)\n"
             "        return x\n    return x\n"),
    ("in a loop", "def f(x: T, xs: L) -> T:\n    for flag in xs:\n        if flag:\n            x = g(x)\n"
                  "            return x\n    return x\n"),
])
def test_rewritten(name: str, source: str) -> None:
    assert any("x' = g(x)" in line for line in _rewritten(source)), name


@pytest.mark.parametrize(("name", "source"), [
    ("falls through", "def f(x: T, flag: bool) -> T:\n    if flag:\n        x = g(x)\n    return x\n"),
    ("continue", "def f(x: T, xs: L) -> None:\n    for flag in xs:\n        if flag:\n            x = g(x)\n"
                 "            if x:\n                continue\n            return\n        use(x)\n"),
    ("try", "def f(x: T, flag: bool) -> T:\n    try:\n        if flag:\n            x = g(x)\n            raise E\n"
            "    except E:\n        use(x)\n    return x\n"),
    ("with", "def f(x: T, flag: bool) -> T:\n    with suppress(E):\n        if flag:\n            x = g(x)\n"
             "            raise E\n    return x\n"),
    ("closure", "def f(x: T, flag: bool) -> T:\n    later = lambda: x\n    if flag:\n        x = g(x)\n"
                "        return later()\n    return x\n"),
    ("bound before", "def f(x: T, flag: bool) -> T:\n    if flag:\n        for x in xs:\n            pass\n"
                     "        x = g(x)\n        return x\n    return x\n"),
    ("unannotated", "def f(x, flag: bool) -> T:\n    if flag:\n        x = g(x)\n        return x\n    return x\n"),
    ("spells Any", "def f(x: list[Any], flag: bool) -> T:\n    if flag:\n        x = g(x)\n        return x\n"
                   "    return x\n"),
    ("self", "class C:\n    def f(self: C, flag: bool) -> C:\n        if flag:\n            self = g(self)\n"
             "            return self\n        return self\n"),
    ("imported", "def f(x: T, flag: bool) -> T:\n    if flag:\n        x = g(x)\n        import x\n"
                 "        return x\n    return x\n"),
])
def test_left_to_mypy(name: str, source: str) -> None:
    assert _rewritten(source) == source.splitlines(), name


def test_a_branch_in_a_rewritten_branch_shadows_the_shadow() -> None:
    source = ("def f(x: T, a: bool, b: bool) -> T:\n    if a:\n        x = g(x)\n        if b:\n"
              "            x = h(x)\n            return x\n        return x\n    return x\n")
    assert _rewritten(source)[2:9] == ["        x' = x", "        x' = g(x)", "        if b:", "            x'' = x'",
                                       "            x'' = h(x')", "            return x''", "        return x'"]


def test_the_rewrite_is_done_once() -> None:
    """The daemon may hand the plugin a tree it parsed before (mypy's cache of parsed trees)."""
    tree = _parsed(RETURNED)
    assert rebinding._rewrite(tree, lambda: True)
    assert not rebinding._rewrite(tree, lambda: True)


def test_not_where_the_module_turns_redefinition_off() -> None:
    tree = _parsed(RETURNED)
    assert not rebinding._rewrite(tree, lambda: False)
    assert not any(isinstance(e, NameExpr) and e.name.endswith(rebinding.SUFFIX) for e in get_subexpressions(tree))


@pytest.mark.parametrize(("comment", "section", "on"), [
    ("", {}, True),
    ("# mypy: allow-redefinition=False\n", {}, False),
    ("", {"allow_redefinition": False}, False),
    ("# mypy: allow-redefinition-old\n", {}, False),
])
def test_a_modules_own_setting_wins(comment: str, section: dict[str, object], on: bool, tmp_path: Path) -> None:
    """The plugin turned ``allow_redefinition`` on for the build; a module's section or comment may turn it off."""
    path = tmp_path / "m.py"
    path.write_text(comment + RETURNED)
    options = Options()
    options.allow_redefinition = True
    if section:
        options.per_module_options["m"] = section
    tree = _parsed(path.read_text(), path=str(path))
    assert parse_rewrites.redefinition_on(options, tree, SourceFiles()) == on


HELPERS = """\
import spmd_stubs as spmd
from spmd_stubs import I, R, S, Tensor
from spmd_stubs.axes import tp


def enter(x: Tensor[I@tp]) -> Tensor[R@tp]:
    return spmd.convert(x, tp, src=I, dst=R)


def gather(x: Tensor[S(0)@tp]) -> Tensor[R@tp]:
    return spmd.all_gather(x, tp, src=S(0), dst=R)
"""

LAYER = """\
import torch
from spmd_stubs import R, Tensor
from spmd_stubs.axes import tp
from rebinding_helpers import enter, gather


def forward(x: torch.Tensor, single: bool) -> Tensor[R@tp]:
    if single:
        x = enter(x)
        return x
    reveal_type(x)
    return gather(x)
"""


def test_rewritten_again_when_rechecked_for_a_changed_import(tmp_path: Path, mypy_runs: MypyRuns) -> None:
    """mypy re-checks a module whose import changed from its source without asking the plugin, unless its
    cache entry is invalid: a rewritten module's never is valid, so it is rewritten in every run."""
    mypy_runs.diagnostics(case_files()[0])  # the default group's run fills the cache
    shutil.copytree(mypy_runs.cache_root / "mypy_cache", tmp_path / "cache")
    shutil.copy(mypy_runs.cache_root / "default.ini", tmp_path / "mypy.ini")
    (tmp_path / "rebinding_helpers.py").write_text(HELPERS)
    (tmp_path / "rebinding_layer.py").write_text(LAYER)
    files = [tmp_path / "rebinding_helpers.py", tmp_path / "rebinding_layer.py"]
    expected = {(tmp_path / "rebinding_layer.py").resolve(): ['11: N: Revealed type is "torch._tensor.Tensor[Any]"']}
    for edit in ("", "\n\ndef more() -> None:\n    pass\n", "\n\ndef more(x: int) -> None:\n    pass\n"):
        (tmp_path / "rebinding_helpers.py").write_text(HELPERS + edit)
        output = run_mypy(files, tmp_path / "mypy.ini", tmp_path / "cache", tmp_path)
        found = {path: [str(d) for d in diagnostics] for path, diagnostics in parse_output(output, tmp_path).items()}
        assert found == expected, output
