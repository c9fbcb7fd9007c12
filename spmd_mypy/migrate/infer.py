"""``spmd-migrate --infer``: write the SPMD annotations the code lacks, until the checker learns nothing new.

The loop, over the files given (checked together, edits held in memory):

1. check them (one in-process mypy run with the plugin, :mod:`spmd_mypy.typed_run`;
   one per configuration where the config file declares configurations);
2. read what the checker saw (:mod:`.infer_evidence`) and decide the
   annotations it implies (:mod:`.infer_rules`): parameters from their call
   sites, returns from the returned values, attributes from their assignments;
   under configurations, only what holds in every one (:mod:`.infer_configurations`);
3. write them (:mod:`.infer_writer`) and check again.  mypy skips the body
   of an unannotated function, so a helper's return type is known only once
   its parameters are written: each round reaches one call level further.
4. An annotation is never kept if the checker rejects it: a new diagnostic
   that is not an SPMD finding (``arg-type``, ``assignment``,
   ``return-value``, ``override``, ...) after writing takes back the
   annotations of that round whose function, call sites or class it falls
   on (all of the round's where it falls on none of them), and the
   annotation becomes a TODO quoting the diagnostic.  A diagnostic is new
   unless the check before reported one in the same file with the same code
   and message (an error the code had is no verdict on the types written).
   A new SPMD finding (``spmd-*``) is what the inference is for: a bug the
   missing types hid.
5. Stop when a round proposes nothing.

TODOs (call sites that disagree, annotations taken back) are written as
comment lines above the function or class they concern.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from spmd_mypy.migrate.files import read_source
from spmd_mypy.migrate.infer_configurations import Configurations, Decided, agreed, type_aliases
from spmd_mypy.migrate.infer_evidence import Evidence, gather
from spmd_mypy.migrate.infer_rules import RETURN, Proposal, Target, Todo, propose
from spmd_mypy.migrate.infer_writer import TODO_PREFIX, as_overlay, write
from spmd_mypy.migrate.overlay import AliasName, ModuleOverlay, SpmdChoice, SpmdTuple, SpmdType
from spmd_mypy.typed_run import Diagnostic, TypedRun, check

__all__ = ["Inference", "infer", "line_map", "new_rejections", "overlay_toml"]

MAX_ROUNDS = 30


@dataclass
class Inference:
    """What a run of the inference wrote and left."""

    originals: dict[Path, str]
    """Each checked file's text before, by resolved path."""
    texts: dict[Path, str]
    """... and after (annotations, imports and TODOs)."""
    modules: dict[Path, str]
    written: list[Proposal] = field(default_factory=list)
    todos: list[Todo] = field(default_factory=list)
    todo_lines: Callable[[str, int], int] | None = None
    """A line a TODO names (of the texts before the TODO lines) -> the line it is in ``texts``."""
    before: list[Diagnostic] = field(default_factory=list)
    """The first check's diagnostics, of ``originals``."""
    diagnostics: list[Diagnostic] = field(default_factory=list)
    """The last check's diagnostics, of ``checked`` (the texts before the TODO lines)."""
    checked: dict[Path, str] = field(default_factory=dict)
    runs: int = 0

    def count(self, kind: str) -> int:
        """How many ``parameter``, ``return`` or ``attribute`` annotations were written."""
        return sum(1 for p in self.written if _kind(p.target) == kind)

    def overlays(self) -> dict[str, ModuleOverlay]:
        """The written annotations as overlay entries, by module."""
        by_module: dict[str, list[Proposal]] = {}
        for proposal in self.written:
            if isinstance(proposal.annotation, AliasName) and proposal.annotation.choice is None:
                continue  # an alias no single flag picks: an overlay cannot say it
            by_module.setdefault(proposal.target.module, []).append(proposal)
        return {module: as_overlay(proposals) for module, proposals in sorted(by_module.items())}


def _kind(target: Target) -> str:
    return "attribute" if not target.name else "return" if target.name == RETURN else "parameter"


def line_map(old: str, new: str) -> dict[int, int]:
    """1-based line numbers of ``old`` -> the same line in ``new``, for the lines an edit kept or rewrote in place."""
    mapping: dict[int, int] = {}
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            for offset in range(i2 - i1):
                mapping[i1 + offset + 1] = j1 + offset + 1
    return mapping


def _old_lines(old: str, new: str) -> dict[int, int]:
    """1-based line numbers of ``new`` -> the line of ``old`` they come from: a line an edit rewrote or
    inserted, the first old line of the rewritten stretch (so a diagnostic on it falls in its function)."""
    mapping: dict[int, int] = {}
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for offset in range(j2 - j1):
            same = tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1)
            mapping[j1 + offset + 1] = i1 + (offset if same else 0) + 1
    return mapping


def _line_mover(old: dict[Path, str], new: dict[Path, str]) -> Callable[[str, int], int]:
    """``(file, line of old[file])`` -> the same line in ``new[file]`` (unmoved where the edit rewrote it)."""
    maps = {path: line_map(old[path], new[path]) for path in new if old[path] != new[path]}

    def moved(file: str, line: int) -> int:
        return maps.get(Path(file).resolve(), {}).get(line, line)

    return moved


def _is_rejection(diagnostic: Diagnostic) -> bool:
    """A diagnostic that says a written type is wrong, rather than an SPMD finding in the code."""
    code = diagnostic.code or ""
    return diagnostic.severity == "error" and (not code.startswith("spmd") or code == "spmd-internal")


def new_rejections(before: TypedRun, old: dict[Path, str], after: TypedRun, new: dict[Path, str]) -> list[Diagnostic]:
    """Rejections ``after`` reports that ``before`` did not, in old lines.

    A rejection is the same as one before where its file, code and message
    are (as many times as before): its line may have moved with the edit,
    and an error the code had before the round is no verdict on the types
    the round wrote.
    """
    def key(diagnostic: Diagnostic) -> tuple[Path, str | None, str]:
        return Path(diagnostic.path).resolve(), diagnostic.code, diagnostic.message

    baseline = Counter(key(d) for d in before.diagnostics if _is_rejection(d))
    backwards = {path: _old_lines(old[path], new[path]) for path in new}
    found = []
    for diagnostic in after.diagnostics:
        if not _is_rejection(diagnostic):
            continue
        if baseline[key(diagnostic)] > 0:
            baseline[key(diagnostic)] -= 1
            continue
        path = Path(diagnostic.path).resolve()
        line = backwards[path].get(diagnostic.line, diagnostic.line) if path in backwards else diagnostic.line
        found.append(dataclasses.replace(diagnostic, line=line))
    return found


Runs = dict[str | None, TypedRun]
"""One run per configuration (the key None: no configurations declared)."""


@dataclass
class _Loop:
    paths: Sequence[Path]
    config_file: Path | None
    configurations: Configurations
    result: Inference
    blocked: dict[Target, Todo] = field(default_factory=dict)
    todos: dict[Target, Todo] = field(default_factory=dict)
    left_to_user: set[str] = field(default_factory=set)
    """What the TODOs already in the sources name (``parameter x of f``): not proposed again."""

    def check(self, texts: dict[Path, str] | None = None) -> Runs:
        """The files (with ``texts`` in place of what is on disk) checked in every configuration."""
        self.result.runs += len(self.configurations.names)
        runs: Runs = {}
        for name in self.configurations.names:
            with self.configurations.selected(name):
                runs[name] = check(self.paths, self.config_file, self.configurations.cache(name), texts=texts)
        return runs

    def edited(self, texts: dict[Path, str], proposals: Sequence[Proposal], evidence: Evidence) -> dict[Path, str]:
        edited = dict(texts)
        for path, module in self.result.modules.items():
            mine = [p for p in proposals if p.target.module == module]
            if mine:
                styles = {key.split(":", 1)[1]: value for key, value in evidence.class_style.items()
                          if key.startswith(module + ":")}
                edited[path] = write(texts[path], module, mine, class_style=styles)
        return edited

    def decide(self, runs: Runs) -> tuple[list[Proposal], list[Todo], Evidence]:
        """What every configuration's run decides (:mod:`.infer_configurations`)."""
        decided = {}
        for name, run in runs.items():
            evidence = gather(run)
            proposals, todos = propose(evidence, set(self.blocked))
            decided[name] = Decided(proposals, todos, evidence, type_aliases(run) if len(runs) > 1 else {})
        proposals, todos = agreed(decided, self.configurations)
        return proposals, todos, next(iter(decided.values())).evidence

    def round(self, runs: Runs, texts: dict[Path, str]) -> tuple[Runs, dict[Path, str], bool]:
        """One round: propose, write, check, take back what the checker rejects. True if anything was kept."""
        candidates, todos, evidence = self.decide(runs)
        candidates = [p for p in candidates if p.target.describe() not in self.left_to_user]
        self.todos = {t.target: t for t in todos}
        while candidates:
            new_texts = self.edited(texts, candidates, evidence)
            new_runs = self.check(new_texts)
            rejected = [found for name, run in runs.items()
                        for found in new_rejections(run, texts, new_runs[name], new_texts)]
            if not rejected:
                self.result.written.extend(candidates)
                self.follow(_line_mover(texts, new_texts))
                return new_runs, new_texts, True
            owners = self.owners(candidates, rejected)
            candidates = [p for p in candidates if p not in owners]
        return runs, texts, False

    def follow(self, moved: Callable[[str, int], int]) -> None:
        """Move the lines the TODOs name with an edit: a TODO names lines of the text it is written into."""
        self.blocked = {target: todo.moved(moved) for target, todo in self.blocked.items()}
        self.todos = {target: todo.moved(moved) for target, todo in self.todos.items()}

    def owners(self, candidates: list[Proposal], rejected: list[Diagnostic]) -> list[Proposal]:
        """The candidates a rejection falls on (all of them where it falls on none), now blocked."""
        owners: list[Proposal] = []
        for diagnostic in rejected:
            path = Path(diagnostic.path).resolve()
            hit = [p for p in candidates if Path(p.file).resolve() == path and diagnostic.line in p.lines]
            for proposal in hit or candidates:
                if proposal not in owners:
                    owners.append(proposal)
                    reported = f"{diagnostic.message} [{diagnostic.code}]".replace("{", "{{").replace("}", "}}")
                    self.blocked[proposal.target] = Todo(
                        proposal.target, proposal.file,
                        f"inferred {_shown(proposal.annotation)} but took it back: mypy then reported {{0}}: {reported}",
                        ((diagnostic.path, diagnostic.line),))
        return owners


def _left_to_user(texts: Iterable[str]) -> set[str]:
    """The places the TODO comments of an earlier run name (what precedes the first ``: ``)."""
    found = set()
    for text in texts:
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.startswith(TODO_PREFIX) and ": " in stripped[len(TODO_PREFIX):]:
                found.add(stripped[len(TODO_PREFIX):].split(": ", 1)[0])
    return found


def _shown(annotation: SpmdType | SpmdTuple | AliasName) -> str:
    return annotation.annotation()


def infer(paths: Sequence[Path], config_file: Path | None = None, cache_dir: Path | None = None) -> Inference:
    """Infer the missing SPMD annotations of ``paths`` (files or directories, checked together).

    Nothing is written to disk: the result holds each file's new text.
    """
    configurations = Configurations.of(config_file, cache_dir)
    loop = _Loop(paths, config_file, configurations, Inference({}, {}, {}))
    runs = loop.check()
    first = next(iter(runs.values()))
    modules = {Path(tree.path).resolve(): module for module, tree in first.trees.items()}
    originals = {path: read_source(path) for path in modules}
    loop.result = Inference(originals, dict(originals), modules, before=_all_diagnostics(runs), runs=len(runs))
    loop.left_to_user = _left_to_user(originals.values())
    texts = dict(originals)
    for _ in range(MAX_ROUNDS):
        runs, texts, progressed = loop.round(runs, texts)
        if not progressed:
            break
    written = {p.target for p in loop.result.written}
    todos = [t for target, t in {**loop.todos, **loop.blocked}.items()
             if target not in written or target in loop.todos]
    loop.result.todos = todos
    loop.result.diagnostics, loop.result.checked = _all_diagnostics(runs), texts
    loop.result.texts, loop.result.todo_lines = _with_todos(texts, modules, todos)
    return loop.result


def _all_diagnostics(runs: Runs) -> list[Diagnostic]:
    """Every configuration's diagnostics, each once."""
    return list(dict.fromkeys(d for run in runs.values() for d in run.diagnostics))


def _with_todos(texts: dict[Path, str], modules: dict[Path, str],
                todos: list[Todo]) -> tuple[dict[Path, str], Callable[[str, int], int]]:
    """The texts with the TODO lines, the lines they name moved past the TODO lines above them; and that move."""
    def written(moved: Callable[[str, int], int] | None) -> dict[Path, str]:
        return {path: write(text, modules[path], [], [t for t in todos if t.target.module == modules[path]], moved=moved)
                for path, text in texts.items()}

    moved = _line_mover(texts, written(None))
    return written(moved), moved


def _toml_type(annotation: SpmdType | SpmdTuple | SpmdChoice | AliasName) -> str:
    if isinstance(annotation, AliasName):
        assert annotation.choice is not None  # Inference.overlays leaves the others out
        return _toml_type(annotation.choice)
    if isinstance(annotation, SpmdChoice):
        branches = f"then = {_toml_type(annotation.then)}, else = {_toml_type(annotation.otherwise)}"
        return f'{{ if = "{annotation.flag}", {branches} }}'
    if isinstance(annotation, SpmdTuple):
        items = ", ".join('"None"' if item is None else _toml_type(item) for item in annotation.items)
        return "{ tuple = [" + items + "] }"
    texts = [f'"{t}"' for t in annotation.alternatives] + (['"None"'] if annotation.optional else [])
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


def overlay_toml(overlays: dict[str, ModuleOverlay]) -> str:
    """Overlay entries in the format :func:`~spmd_mypy.migrate.overlay.load_overlays` reads."""
    lines = ["# SPMD annotations inferred by spmd-migrate --infer (load with spmd-migrate --overlay FILE)."]
    for module, overlay in overlays.items():
        if overlay.functions:
            lines += ["", f'[modules."{module}".functions]']
            for path, entries in overlay.functions.items():
                body = ", ".join(f"{name} = {_toml_type(t)}" for name, t in entries.items())
                lines.append(f'"{path}" = {{ {body} }}')
        if overlay.attributes:
            lines += ["", f'[modules."{module}".attributes]']
            lines += [f'"{path}" = {_toml_type(t)}' for path, t in overlay.attributes.items()]
    return "\n".join(lines) + "\n"
