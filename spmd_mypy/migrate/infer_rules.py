"""From what the checker saw to the annotations to write: the inference rules.

* A **parameter** without an SPMD type gets the type its call sites pass,
  axis by axis: an axis every call site mentions with the same type is
  written; an axis the sites disagree on is left out (the function then
  passes it through, as any function annotated on fewer axes does) and a
  TODO names the call sites.  No axis left: no annotation, only the TODO.
  It waits while a call site's argument is still unknown, and a function
  nobody calls (an entry point) gets nothing.
* A **return** without an SPMD type gets the type of the values the body
  returns, when mypy checked the body, every return is a tensor (or a fixed
  tuple of tensors) of a known type and they all agree, and no parameter of
  the same function is being inferred in the same round.
* An **attribute** ``self.NAME`` the class declares no type for gets the
  type of the values assigned to it (``nn.Parameter(x)``: ``x``'s), when
  every assignment is a tensor of the same known type.
"""

from __future__ import annotations

from dataclasses import dataclass

from mypy.types import NoneType, Type, get_proper_type

from spmd_mypy.migrate.infer_evidence import AttributeEvidence, Evidence, FunctionEvidence, Site, tuple_items
from spmd_mypy.migrate.overlay import SpmdTuple, SpmdType
from spmd_mypy.representation import members, spmd_members, tensor_instance
from spmd_stubs.core import AxisType, TensorType

__all__ = ["Target", "Proposal", "Todo", "propose"]

RETURN = "return"


@dataclass(frozen=True)
class Target:
    """One place an annotation goes: a parameter or the return of a function, or an attribute (name "")."""

    module: str
    path: str
    name: str

    def describe(self) -> str:
        if not self.name:
            return f"attribute {self.path}"
        if self.name == RETURN:
            return f"the return type of {self.path}"
        return f"parameter {self.name} of {self.path}"


@dataclass(frozen=True)
class Proposal:
    """An annotation to write, and the lines (of ``file``) a diagnostic it causes would appear on."""

    target: Target
    annotation: SpmdType | SpmdTuple
    file: str
    lines: frozenset[int]


@dataclass(frozen=True)
class Todo:
    """An annotation left to the user, with why."""

    target: Target
    file: str
    message: str


def _known(typ: Type | None) -> TensorType | None:
    """The one known SPMD type of a tensor type (not a union of several, not Optional)."""
    if typ is None or len(members(typ)) != 1:
        return None
    found = spmd_members(typ)
    return found[0] if len(found) == 1 else None


def _where(site: Site) -> str:
    return f"{site.path}:{site.line}"


def _shown(typ: Type | None) -> str:
    found = [str(t) if t is not None else "unknown" for t in spmd_members(typ)] if typ is not None else []
    return " | ".join(found) or "not a tensor"


def _agreement(sites: list[Site]) -> tuple[TensorType | None, list[str]]:
    """The axes every site gives the same type; the axes they disagree on."""
    types: list[list[TensorType | None]] = [spmd_members(s.type) if s.type is not None else [] for s in sites]
    flat = [t for each in types for t in each]
    if any(t is None for t in flat):
        return None, []
    by_axis: dict[str, set[AxisType]] = {}
    mentioned = [set(t.as_dict()) for t in flat if t is not None]
    common = set.intersection(*mentioned) if mentioned else set()
    for t in flat:
        assert t is not None
        for axis, axis_type in t.axes:
            if axis in common:
                by_axis.setdefault(axis, set()).add(axis_type)
    agreed = {axis: next(iter(found)) for axis, found in by_axis.items() if len(found) == 1}
    disagreeing = sorted(axis for axis, found in by_axis.items() if len(found) > 1)
    ordered = {axis: agreed[axis] for axis, _ in flat[0].axes if axis in agreed} if flat and flat[0] else {}
    return (TensorType.of(ordered) if ordered else None), disagreeing


def _parameter(function: FunctionEvidence, name: str) -> tuple[Proposal | None, Todo | None]:
    sites = [call[name] for call in function.calls if name in call]
    target = Target(function.module, function.path, name)
    if not sites or any(s.type is None or not spmd_members(s.type) for s in sites):
        return None, None  # never called, a call not yet typed, or not a tensor
    if any(any(m is None for m in spmd_members(s.type)) for s in sites if s.type is not None):
        return None, None
    agreed, disagreeing = _agreement(sites)
    todo = None
    if disagreeing or agreed is None:
        shown = ", ".join(f"{_where(s)} passes {_shown(s.type)}" for s in sites)
        axes = ", ".join(disagreeing) or "every axis"
        todo = Todo(target, function.file, f"the call sites disagree on {axes} ({shown}); "
                    f"annotate {name} by hand (a Union, or one type the callers convert to)")
    if agreed is None:
        return None, todo
    lines = frozenset(range(function.line, function.end_line + 1)) | {line for _, line in function.call_lines}
    annotation = SpmdType((agreed,), optional=name in function.optional_params)
    return Proposal(target, annotation, function.file, lines), todo


def _returned(sites: list[Site]) -> SpmdType | SpmdTuple | None:
    """The one type every return gives, if each is a known tensor or a fixed tuple of them."""
    results: set[SpmdType | SpmdTuple] = set()
    for site in sites:
        if site.type is None:
            return None
        items = tuple_items(site.type)
        if items is not None:
            known = [_known(item) for item in items]
            if any(k is None for k in known):
                return None
            results.add(SpmdTuple(tuple(SpmdType((k,)) for k in known if k is not None)))
            continue
        known_one = _known(site.type)
        if known_one is None:
            return None
        results.add(SpmdType((known_one,)))
    return next(iter(results)) if len(results) == 1 else None


def _return(function: FunctionEvidence) -> Proposal | None:
    if not function.untyped_return or not function.body_checked or not function.returns:
        return None
    if all(isinstance(get_proper_type(s.type), NoneType) for s in function.returns if s.type is not None):
        return None
    annotation = _returned(function.returns)
    if annotation is None:
        return None
    lines = frozenset(range(function.line, function.end_line + 1)) | {line for _, line in function.call_lines}
    return Proposal(Target(function.module, function.path, RETURN), annotation, function.file, lines)


def _attribute(attribute: AttributeEvidence) -> tuple[Proposal | None, Todo | None]:
    sites = attribute.assignments
    if any(s.type is None or tensor_instance(get_proper_type(s.type)) is None for s in sites):
        return None, None
    known = [_known(s.type) for s in sites]
    if any(k is None for k in known):
        return None, None
    target = Target(attribute.module, attribute.path, "")
    if len(set(known)) > 1:
        shown = ", ".join(f"{_where(s)} assigns {k}" for s, k in zip(sites, known))
        return None, Todo(target, attribute.file, f"the assignments disagree ({shown}); annotate it by hand")
    first = known[0]
    assert first is not None
    lines = frozenset(range(attribute.class_line, attribute.class_end_line + 1))
    return Proposal(target, SpmdType((first,)), attribute.file, lines), None


def propose(evidence: Evidence, blocked: set[Target]) -> tuple[list[Proposal], list[Todo]]:
    """Every annotation the evidence decides, and every disagreement, except for ``blocked`` targets."""
    proposals: list[Proposal] = []
    todos: list[Todo] = []
    for function in evidence.functions.values():
        pending = False
        for name in function.untyped_params:
            proposal, todo = _parameter(function, name)
            if proposal is not None and proposal.target not in blocked:
                proposals.append(proposal)
                pending = True
            if todo is not None:
                todos.append(todo)
        returned = None if pending else _return(function)
        if returned is not None and returned.target not in blocked:
            proposals.append(returned)
    for attribute in evidence.attributes.values():
        proposal, todo = _attribute(attribute)
        if proposal is not None and proposal.target not in blocked:
            proposals.append(proposal)
        if todo is not None:
            todos.append(todo)
    return proposals, todos
