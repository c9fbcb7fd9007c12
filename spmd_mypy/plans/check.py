"""A plan's problems, found by evaluating its modules' data flow, and reported with their checked fixes."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping, Sequence

from mypy.checker import TypeChecker
from mypy.nodes import Context

from spmd_mypy import errorcodes, report
from spmd_mypy.fixes import PREFIX
from spmd_mypy.plans import tree
from spmd_mypy.plans.assembled import Entry, Plan
from spmd_mypy.plans.edits import edit_note
from spmd_mypy.plans.fixes import best_fix
from spmd_mypy.plans.flow import Flow, Planned, Problem
from spmd_stubs.core.parallel_styles import style_types

_NO_SPAN = f"{PREFIX}none (its place in the source is not read)"


def problems(api: TypeChecker, root: tree.Node, found: Sequence[Entry], axis: str, changed: str | None = None,
             strict: bool = False, as_written: Sequence[Entry] = (), plain: Callable[[str], bool] = lambda path: True,
             reduced: Mapping[str, int] | None = None) -> list[Problem] | None:
    """What the plan's modules' data flow finds wrong, each once (``strict``, ``plain``, ``reduced``: as
    :class:`Flow` says).
    A module whose entry is not a modelled style hands on unknown values; None where that entry is the
    ``changed`` one.  The inputs are seeded as the plan ``as_written`` (default: this one) has them: a
    fix does not change what the caller passes."""
    planned = _planned(root, found, changed)
    seeding = _planned(root, as_written, None) if as_written else planned
    if planned is None or seeding is None:
        return None
    flow = Flow(api, axis, planned, strict, plain, reduced)
    owners = [root, *(n for n in root.walk() if any(c.path in planned for c in n.children.values()))]
    for owner in owners:
        if owner is root or owner.path not in flow.reached:
            flow.owner(owner, seeding)
    return list({problem.message: problem for problem in flow.problems}.values())


def _planned(root: tree.Node, found: Sequence[Entry], changed: str | None) -> dict[str, Planned] | None:
    """Each planned sub-module's entry and types; None where the ``changed`` entry is not modelled."""
    planned: dict[str, Planned] = {}
    for entry in found:
        for node in tree.matches(root, entry.key):
            try:
                if entry.style is None:
                    raise ValueError(f"{entry.key}: not a literal style")
                types = style_types(entry.style.name, dict(entry.style.options), node.kind)
            except ValueError:
                if entry.key == changed:
                    return None
                types = None
            planned[node.path] = Planned(entry.key, str(entry.style), types)
    return planned


def report_problems(api: TypeChecker, root: tree.Node, read: Plan, axis: str, plain: Callable[[str], bool],
                    reduced: Mapping[str, int]) -> None:
    """Each problem with the fix that removes it and adds none (checked strictly), at the entry the fix
    changes, or at the plan where it adds one; problems one fix removes together (a mismatch and what
    follows from it) are reported once.  A checked fix is stated as it is (``Fix:``), with its edit."""
    found, display = read.entries, read.display
    by_key = {entry.key: entry for entry in found}
    before = {p.message for p in problems(api, root, found, axis, strict=True, plain=plain, reduced=reduced) or ()}
    grouped: dict[tuple[str, str], tuple[Problem, Entry | None]] = {}
    for problem in problems(api, root, found, axis, plain=plain, reduced=reduced) or ():
        if not problem.keys or problem.keys[0] not in by_key and not problem.unplanned:
            continue

        def removed(plan: Sequence[Entry], key: str, message: str = problem.message) -> int | None:
            after = problems(api, root, plan, axis, key, strict=True, as_written=found, plain=plain, reduced=reduced)
            left = {p.message for p in after} if after is not None else {message}
            return len(before - left) if left <= before - {message} else None

        fix = best_fix(problem.keys, found, removed, display if problem.unplanned else None) \
            if problem.advice is None else None
        grouped.setdefault((fix.key, str(fix.style)) if fix is not None else ("", problem.message), (problem, fix))
    for problem, fix in grouped.values():
        written = by_key.get(fix.key if fix is not None else problem.keys[0])
        shared = written.shared if written is not None else read.display_shared or display is None
        place: Context = read.at if shared else written.node if written is not None else display or read.at
        if fix is None:
            advice = problem.advice or (f'Fix: give "{problem.keys[0]}" a style.' if written is None else
                                        f"Fix: make the layouts of {', '.join(repr(k) for k in problem.keys)} agree.")
            report.fail(api, place, f"{problem.message}. {advice}", errorcodes.PLAN)
            continue
        added = fix.key not in by_key
        advice = f'Fix: add "{fix.key}": {fix.style}' if added else f'Fix: "{fix.key}": {fix.style}'
        if shared:  # checked for this plan only: other plans may read the code it changes
            report.fail(api, place, f"{problem.message}. {advice}, where the plan is written (other plans may "
                        "read that code too).", errorcodes.PLAN)
            continue
        edit = edit_note(api, replace(fix, value=None) if added else fix, display) or _NO_SPAN
        report.fail(api, place, f"{problem.message}. {advice}.", errorcodes.PLAN, edit=edit)
