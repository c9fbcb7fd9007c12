"""Rewrites of a user module's tree when mypy has parsed it, before its semantic analysis.

Two rewrites make an assignment where mypy's redefinition needs one:
:mod:`spmd_mypy.rebinding` (a parameter rebound in a branch that returns)
and :mod:`spmd_mypy.spmd_types_api.narrowing` (spmd_types' narrowing
statements).  Both need the redefinition the plugin turns on
(:func:`redefinition_on`), and both share one life cycle
(:class:`ParseRewrite`): a rewritten module's cache entry is never valid,
so mypy parses it through the path that rewrites it (mypy re-parses a
module from its cache entry's source without asking the plugin when only
its imports changed; when it checks an entry, it has not parsed the module).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Callable

from mypy.config_parser import parse_mypy_comments
from mypy.nodes import MypyFile
from mypy.options import Options
from mypy.util import get_mypy_comments

from spmd_mypy.sources import SourceFiles, SourceUnreadable


@dataclass
class ParseRewrite:
    """One rewrite for one build: which modules it rewrote when last parsed."""

    rewrite: Callable[[MypyFile], bool]
    """Rewrites a parsed user module (never a stub); whether it changed anything."""
    cache_key: str
    """The key a rewritten module's cache entry records."""
    failure: str
    """What a failed rewrite leaves, said once on stderr (no hook context to report on)."""
    rewritten: set[str] = field(default_factory=set)
    """The paths of the modules rewritten when last parsed."""

    def parsed(self, tree: MypyFile) -> None:
        """Called when mypy has parsed ``tree`` (a user module), before its semantic analysis."""
        self.rewritten.discard(tree.path)
        try:
            if not tree.is_stub and self.rewrite(tree):
                self.rewritten.add(tree.path)
        except Exception as error:  # noqa: BLE001 -- a plugin must never crash mypy
            print(f"spmd_mypy: {tree.path}: {self.failure} ({type(error).__name__}: {error}). Please report it.",
                  file=sys.stderr)

    def cache_data(self, path: str, is_check: bool) -> dict[str, str]:
        """What a module's cache entry records (``is_check``: what a valid entry must record): a rewritten
        module's entry is never valid."""
        return {self.cache_key: "rewritten"} if not is_check and path in self.rewritten else {}


def redefinition_on(options: Options, tree: MypyFile, sources: SourceFiles) -> bool:
    """Whether mypy checks ``tree`` with flexible redefinition: its ``[mypy-...]`` section and inline
    ``# mypy:`` comments applied, as mypy applies them."""
    module = options.clone_for_module(tree.fullname)
    try:
        comments = get_mypy_comments("\n".join(sources.lines(tree)))
    except (SourceUnreadable, UnicodeDecodeError):  # its inline settings unknown: mypy's semantics
        return False
    if comments:
        changes, _ = parse_mypy_comments(comments, module)
        module = module.apply_changes(changes)
    return bool(module.allow_redefinition and not module.allow_redefinition_old)
