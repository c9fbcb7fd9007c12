"""``--infer`` under declared configurations: an annotation is written only where it holds in every one.

A program checked in several configurations (``[spmd_mypy] configurations``,
docs/checker.md#configurations) is checked by the inference in each of them
(one mypy run per configuration, with its own cache, as ``spmd-check``
keeps them: ``<cache dir>/configurations/<name>``).  Each configuration's
run decides its own annotations (:mod:`.infer_rules`); then, per place:

* every configuration that has evidence for it (a call passing the
  parameter, a return, an assignment) decides the same type: that type;
* they decide different types, and a type alias the module has in scope is,
  in each of them, the type it decides (``Activation = Tensor[S[0, tp]] if
  spmd.flags.sequence_parallel else Tensor[I[tp]]``): the alias's name;
* otherwise nothing is written, and a TODO names what each configuration
  decided.  A configuration that decides nothing where it has evidence
  (a call's argument still unknown, or not a tensor there) holds the place
  back: a later round may decide it, else its TODO stays.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mypy.errors import CompileError
from mypy.nodes import TypeAlias

from spmd_mypy import config
from spmd_mypy.configurations import declared
from spmd_mypy.migrate.infer_evidence import Evidence
from spmd_mypy.migrate.infer_rules import RETURN, Proposal, Target, Todo
from spmd_mypy.migrate.overlay import AliasName, SpmdChoice, SpmdTuple, SpmdType
from spmd_mypy.representation import members, spmd_of
from spmd_mypy.typed_run import TypedRun

__all__ = ["Configurations", "Decided", "agreed", "type_aliases"]

_FOLDER = "configurations"
"""The folder of mypy's cache directory with one cache per configuration, shared with ``spmd-check``."""


@dataclass(frozen=True)
class Configurations:
    """The configurations a config file declares (none: one plain run), and where each run caches."""

    declared: tuple[declared.Configuration, ...]
    cache_dir: Path | None
    """The plain runs' cache (None: mypy's choice)."""
    cache_root: Path
    """The directory holding ``configurations/<name>``."""

    @classmethod
    def of(cls, config_file: Path | None, cache_dir: Path | None) -> "Configurations":
        """The configurations of ``config_file``; their caches in mypy's cache directory (``cache_dir``, the
        config file's ``cache_dir``, ``$MYPY_CACHE_DIR``, else ``.mypy_cache``), as ``spmd-check`` keeps them.
        A bad setting is a :class:`~mypy.errors.CompileError`, as in a check (:mod:`spmd_mypy.typed_run`)."""
        found = str(config_file) if config_file is not None else None
        try:
            configurations = config.load(found).configurations
        except config.ConfigError as error:  # stopped as mypy stops on it: the same message
            raise CompileError([f"{found}: error: {error}"]) from None
        chosen = cache_dir or config.mypy_setting(found, "cache_dir") or os.environ.get("MYPY_CACHE_DIR")
        return cls(configurations, cache_dir, Path(chosen or ".mypy_cache"))

    @property
    def names(self) -> list[str | None]:
        return [c.name for c in self.declared] or [None]

    def cache(self, name: str | None) -> Path | None:
        """The cache of one configuration's runs; a missing one starts as a copy of the plain cache."""
        if name is None:
            return self.cache_dir
        cache = self.cache_root / _FOLDER / name
        if not _holds_cache(cache) and _holds_cache(self.cache_root):
            shutil.copytree(self.cache_root, cache, dirs_exist_ok=True, ignore=shutil.ignore_patterns(_FOLDER))
        return cache

    @contextmanager
    def selected(self, name: str | None) -> Iterator[None]:
        """Within the block, mypy's runs in this process check configuration ``name``."""
        if name is None:
            yield
            return
        saved = os.environ.get(declared.ENVIRONMENT)
        os.environ[declared.ENVIRONMENT] = name
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop(declared.ENVIRONMENT, None)
            else:
                os.environ[declared.ENVIRONMENT] = saved

    def choice(self, by_name: Mapping[str | None, SpmdType]) -> SpmdChoice | None:
        """The overlay form (``{ if = flag, then, else }``) of types two configurations decide, where they
        differ in one boolean flag."""
        if len(self.declared) != 2 or set(by_name) != {c.name for c in self.declared}:
            return None
        first, second = (dict(c.flags) for c in self.declared)
        differing = [flag for flag in {*first, *second} if first.get(flag) != second.get(flag)]
        if len(differing) != 1 or {first.get(differing[0]), second.get(differing[0])} != {True, False}:
            return None
        flag = differing[0]
        on, off = self.declared if first[flag] is True else reversed(self.declared)
        return SpmdChoice(flag, by_name[on.name], by_name[off.name])


def _holds_cache(directory: Path) -> bool:
    """Whether mypy has written a cache here (a folder per Python version, ``3.11``)."""
    return directory.is_dir() and any(entry.name[:1].isdigit() for entry in directory.iterdir())


def type_aliases(run: TypedRun) -> dict[str, dict[str, tuple[int, SpmdType]]]:
    """Module -> the tensor type aliases in its scope (defined or imported): name -> (line, type)."""
    found: dict[str, dict[str, tuple[int, SpmdType]]] = {}
    for module, tree in run.trees.items():
        for name, symbol in tree.names.items():
            node = symbol.node
            if not isinstance(node, TypeAlias) or len(members(node.target)) != 1:
                continue
            spmd = spmd_of(node.target)
            if spmd is not None:
                line = node.line if node.module == module else 0
                found.setdefault(module, {})[name] = (line, SpmdType((spmd,)))
    return found


@dataclass
class Decided:
    """What one configuration's run decided, and what it saw."""

    proposals: list[Proposal]
    todos: list[Todo]
    evidence: Evidence
    aliases: dict[str, dict[str, tuple[int, SpmdType]]]


def _has_evidence(evidence: Evidence, target: Target) -> bool:
    """Whether a configuration's run saw anything that decides ``target`` (its code may be ruled out)."""
    if not target.name:
        return f"{target.module}:{target.path}" in evidence.attributes
    for function in evidence.functions.values():
        if function.module == target.module and function.path == target.path:
            if target.name == RETURN:
                return bool(function.returns)
            return any(target.name in call for call in function.calls)
    return False


def _definition_line(decided: Mapping[str | None, Decided], target: Target) -> int:
    for each in decided.values():
        for function in each.evidence.functions.values():
            if function.module == target.module and function.path == (target.path if target.name else
                                                                       target.path.rsplit(".", 1)[0]):
                return function.line
        attribute = each.evidence.attributes.get(f"{target.module}:{target.path}")
        if attribute is not None:
            return attribute.class_line
    return 0


def _alias_for(decided: Mapping[str | None, Decided], target: Target, types: dict[str | None, SpmdType],
               optional: bool, configurations: Configurations) -> AliasName | None:
    """A type alias in scope at ``target`` that is, in each configuration, the type it decided."""
    line = _definition_line(decided, target)
    names = set.intersection(*(set(each.aliases.get(target.module, {})) for each in decided.values()))
    for name in sorted(names):
        per_configuration = {c: each.aliases[target.module][name] for c, each in decided.items()}
        if all(_stands_for(per_configuration[c][1], t) for c, t in types.items()) and all(
                defined < line for defined, _ in per_configuration.values()):
            chosen = {c: SpmdType(t.alternatives, optional) for c, (_, t) in per_configuration.items()}
            return AliasName(name, optional, configurations.choice(chosen))
    return None


def _stands_for(alias: SpmdType, decided: SpmdType) -> bool:
    """Whether the alias may be written for the decided type: the same, or ``S(i)`` where it decided ``V``
    on an axis (the same local type with a known shard dim, which the checker accepts either way)."""
    if alias == decided:
        return True
    [written], [found] = alias.alternatives, decided.alternatives
    if alias.optional != decided.optional or written.as_dict().keys() != found.as_dict().keys():
        return False
    return all(kind == found.as_dict()[axis] or (kind.local == found.as_dict()[axis].local
                                                 and found.as_dict()[axis].shard is None)
               for axis, kind in written.axes)


def _bare(annotation: SpmdType | SpmdTuple | AliasName) -> tuple[SpmdType | None, bool]:
    """A single tensor type without its ``| None``, and whether it had one (None: not a single tensor)."""
    if isinstance(annotation, SpmdType) and len(annotation.alternatives) == 1:
        return SpmdType(annotation.alternatives), annotation.optional
    return None, False


def agreed(decided: Mapping[str | None, Decided], configurations: Configurations) -> tuple[list[Proposal], list[Todo]]:
    """The proposals that hold in every configuration (one type, or a flag-chosen alias), and the TODOs."""
    if len(decided) == 1:
        [only] = decided.values()
        return only.proposals, only.todos
    todos = {t.target: t for each in decided.values() for t in each.todos}
    by_target: dict[Target, dict[str | None, Proposal]] = {}
    for name, each in decided.items():
        for proposal in each.proposals:
            by_target.setdefault(proposal.target, {})[name] = proposal
    proposals = []
    for target, found in by_target.items():
        first = next(iter(found.values()))
        silent = [c for c in decided if c not in found and _has_evidence(decided[c].evidence, target)]
        if silent:  # undecided there: it may be decided in a later round, else this is the last word
            shown = ", ".join(f"{c}: {p.annotation.annotation()}" for c, p in found.items())
            todos.setdefault(target, Todo(target, first.file, f"the configurations disagree ({shown}; "
                                          f"{', '.join(map(str, silent))}: no type); annotate it by hand"))
            continue
        lines = frozenset(line for p in found.values() for line in p.lines)
        if len({p.annotation for p in found.values()}) == 1:
            proposals.append(Proposal(target, first.annotation, first.file, lines))
            continue
        bare = {c: _bare(p.annotation) for c, p in found.items()}
        types = {c: t for c, (t, _) in bare.items() if t is not None}
        alias = None
        if len(types) == len(found):
            alias = _alias_for(decided, target, types, any(o for _, o in bare.values()), configurations)
        if alias is not None:
            proposals.append(Proposal(target, alias, first.file, lines))
            continue
        shown = ", ".join(f"{c}: {p.annotation.annotation()}" for c, p in found.items())
        todos[target] = Todo(target, first.file,
                             f"the configurations disagree ({shown}) and no type alias in scope chooses these "
                             f"types by flag; declare one (Name = Tensor[...] if spmd.flags.<flag> else "
                             f"Tensor[...]) and annotate with it")
    return proposals, list(todos.values())
