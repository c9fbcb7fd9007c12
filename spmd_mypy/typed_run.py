"""One mypy run with the plugin, in this process, keeping what it inferred: the tools' view of the checker.

The coverage report and annotation inference read the same thing mypy
checks: every expression's type (SPMD types included) in the given files,
their trees, and the diagnostics.  The files themselves are always checked
again (given to mypy as text, so no cached result stands in for them);
everything they import (torch above all) comes from the cache as usual.

>>> run = check([Path("examples/mlp/tp_mlp.py")])  # doctest: +SKIP
>>> run.diagnostics, len(run.types)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from mypy import build
from mypy.build import BuildSource
from mypy.errors import CompileError
from mypy.fscache import FileSystemCache
from mypy.main import process_options
from mypy.nodes import Expression, MypyFile
from mypy.options import Options
from mypy.types import Type

from spmd_mypy import config

__all__ = ["Diagnostic", "TypedRun", "check"]

_DIAGNOSTIC = re.compile(
    r"^(?P<path>[^:]+):(?P<line>\d+):(?:(?P<column>\d+):)? (?P<severity>error|note): (?P<message>.*?)"
    r"(?:  \[(?P<code>[a-z0-9-]+)\])?$"
)


@dataclass(frozen=True)
class Diagnostic:
    """One line of mypy's report."""

    path: str
    line: int
    column: int | None
    severity: str
    message: str
    code: str | None

    @classmethod
    def parse(cls, line: str) -> "Diagnostic | None":
        found = _DIAGNOSTIC.match(line)
        if found is None:
            return None
        column = found["column"]
        return cls(found["path"], int(found["line"]), int(column) if column else None, found["severity"],
                   found["message"], found["code"])


@dataclass
class TypedRun:
    """What one run inferred for the checked files."""

    diagnostics: list[Diagnostic]
    trees: dict[str, MypyFile]
    """The checked files' trees, by module name."""
    types: dict[Expression, Type]
    """Every expression's type in those trees (mypy's type map; on a cold cache, of every module it checked)."""
    native_parser: bool = True
    """Whether mypy's native parser made the trees (what their columns count: :mod:`spmd_mypy.sources`)."""

    def type_of(self, expr: Expression) -> Type | None:
        return self.types.get(expr)


def check(paths: Sequence[Path], config_file: Path | None = None, cache_dir: Path | None = None,
          flags: Sequence[str] = (), strict: bool | None = None,
          texts: Mapping[Path, str] | None = None) -> TypedRun:
    """Check ``paths`` (files or directories) as ``mypy [flags] --config-file F PATH...`` would.

    ``texts`` gives the source of some of those files (by resolved path) in
    place of what is on disk: a tool checks its edits without writing them.

    ``config_file`` None: the one mypy finds from the current directory.
    ``strict`` True or False: the plugin's ``strict`` setting as given, not
    as the config file says.  Raises :class:`mypy.errors.CompileError` where
    mypy stops (a bad configuration, a syntax error), with mypy's messages.
    """
    arguments = [*flags, "--show-column-numbers", "--show-error-codes", "--no-pretty", "--hide-error-context",
                 "--no-error-summary"]
    if config_file is not None:
        arguments += ["--config-file", str(config_file)]
    if cache_dir is not None:
        arguments += ["--cache-dir", str(cache_dir)]
    fscache = FileSystemCache()
    sources, options = process_options([*arguments, *map(str, paths)], fscache=fscache)
    _require_the_plugin(options)
    options.export_types = True
    options.num_workers = 0  # mypy's parallel workers keep their type maps: the tools read this process's
    modules = {source.module for source in sources}
    _keep_trees(options, modules)
    with tempfile.TemporaryDirectory(prefix="spmd-typed-run-") as scratch:
        checked, originals = _with_texts(sources, texts or {}, Path(scratch))
        with config.overriding(**({} if strict is None else {"strict": strict})):
            result = build.build(checked, options, fscache=fscache)
        _forget_copies(result, checked, originals)
    trees = {name: state.tree for name, state in result.graph.items() if name in modules and state.tree is not None}
    for tree in trees.values():
        tree.path = originals.get(tree.path, tree.path)
    diagnostics = [_original(d, originals) for d in map(Diagnostic.parse, result.errors) if d is not None]
    return TypedRun(diagnostics, trees, dict(result.types), options.native_parser)


def _require_the_plugin(options: Options) -> None:
    """Stop (a :class:`CompileError`) where the settings are bad or the run would not load the plugin: a
    tool's report of such a run would say nothing of the SPMD types, and look like a clean one."""
    try:
        config.load(options.config_file)
    except config.ConfigError as error:
        raise CompileError([f"{options.config_file}: error: {error}"]) from None
    if not any(config.names_the_plugin(entry) for entry in options.plugins):
        raise CompileError([f"error: {config.plugin_missing(options.config_file)}"])


def _keep_trees(options: Options, modules: set[str]) -> None:
    """Keep the checked modules' trees after the build, and only theirs complete.

    mypy frees every tree once its module is checked unless ``preserve_asts``
    is set, and with it set it also parses and checks the bodies of every
    installed package it would otherwise skip (torch's: a cold run takes
    minutes without the recommended config's skips).  So it is set, and taken
    back for every other dotted module (a ``*.*`` section: mypy puts a
    module's own section before any pattern); the remaining top-level
    modules (``torch/__init__.py``) cost little.
    """
    options.preserve_asts = True
    others = {"preserve_asts": False}
    options.per_module_options.setdefault("*.*", {}).update(others)
    for module in modules:
        options.per_module_options.setdefault(module, {})["preserve_asts"] = True
    options._per_module_cache = None  # built from per_module_options on first use


def _with_texts(sources: list[BuildSource], texts: Mapping[Path, str],
                scratch: Path) -> tuple[list[BuildSource], dict[str, str]]:
    """The sources to check, those ``texts`` gives written to copies under ``scratch``; copy -> original path.

    The copies keep their module names and base directories, so imports
    resolve as before; mypy (its native parser) and the plugin (which reads
    an annotation's source text back) read the copy.
    """
    checked, originals = [], {}
    for index, source in enumerate(sources):
        text = texts.get(Path(source.path).resolve()) if source.path is not None else None
        if text is None:
            checked.append(_as_text(source))
            continue
        copy = scratch / str(index) / Path(str(source.path)).name
        copy.parent.mkdir()
        copy.write_text(text)
        originals[str(copy)] = str(source.path)
        checked.append(BuildSource(str(copy), source.module, text, source.base_dir, source.followed))
    return checked, originals


def _forget_copies(result: build.BuildResult, checked: list[BuildSource], originals: dict[str, str]) -> None:
    """Drop what the cache holds for the copies: it names their paths, and a later mypy run over the
    original (whose text may be the copy's once the edits are written) would print those paths."""
    store = result.manager.metastore
    for source in checked:
        if source.path in originals:
            for name in build.get_cache_names(source.module, source.path, result.manager.options):
                if name is not None:
                    with contextlib.suppress(OSError):  # not written (no cache, or the module not checked)
                        store.remove(name)
    store.commit()


def _original(diagnostic: Diagnostic, originals: dict[str, str]) -> Diagnostic:
    path = originals.get(diagnostic.path)
    return diagnostic if path is None else dataclasses.replace(diagnostic, path=path)


def _as_text(source: BuildSource) -> BuildSource:
    """The source with its text, so mypy checks it again rather than trusting its cache entry."""
    if source.path is None or source.text is not None:
        return source
    return BuildSource(source.path, source.module, Path(source.path).read_text(), source.base_dir, source.followed)
