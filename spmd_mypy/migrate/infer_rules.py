"""From what the checker saw to the annotations to write: the inference rules.

* A **parameter** without an SPMD type gets the type its call sites pass,
  axis by axis: an axis every call site mentions with the same type is
  written (``S(i)`` where the others say ``V``: the same local type with a
  known shard dim); an axis the sites disagree on is left out (the function then
  passes it through, as any function annotated on fewer axes does) and a
  TODO names the call sites.  No axis left: no annotation, only the TODO.
  It waits while a call site's argument is still unknown, and a function
  nobody calls (an entry point) gets nothing.  An argument that may be None
  (``Optional[Tensor[...]]``, ``None``) or a ``None`` default makes it
  ``Tensor[...] | None``; an argument that may be anything else besides a
  tensor makes it nothing.
* A **return** without an SPMD type gets the type of the values the body
  returns, when mypy checked the body, every return is a tensor (or a fixed
  tuple of tensors) of a known type and they all agree, and no parameter of
  the same function is being inferred in the same round or still waits
  for a call site's argument to become known.
* An **attribute** ``self.NAME`` the class declares no type for gets the
  type of the values assigned to it (``nn.Parameter(x)``: ``x``'s), when
  every assignment is a tensor of the same known type.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from mypy.types import AnyType, NoneType, Type, get_proper_type

from spmd_mypy.migrate.infer_evidence import AttributeEvidence, Evidence, FunctionEvidence, Site, tuple_items
from spmd_mypy.migrate.overlay import AliasName, SpmdTuple, SpmdType
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
    annotation: SpmdType | SpmdTuple | AliasName
    file: str
    lines: frozenset[int]


@dataclass(frozen=True)
class Todo:
    """An annotation left to the user, with why."""

    target: Target
    file: str
    message: str
    """The text, with ``{0}``, ``{1}``... where it names ``places`` (their lines move as TODO lines are added)."""
    places: tuple[tuple[str, int], ...] = ()

    def text(self, moved: Callable[[str, int], int] | None = None) -> str:
        """The message, each place named ``line 12`` (in this file) or ``path:12``, its line ``moved``."""
        named = []
        for path, line in self.places:
            line = moved(path, line) if moved is not None else line
            named.append(f"line {line}" if path == self.file else f"{path}:{line}")
        return self.message.format(*named)

    def moved(self, moved: Callable[[str, int], int]) -> "Todo":
        """The same TODO, the lines of its places ``moved`` (to the lines of an edited text)."""
        return replace(self, places=tuple((path, moved(path, line)) for path, line in self.places))


def _known(typ: Type | None) -> TensorType | None:
    """The one known SPMD type of a tensor type (not a union of several, not Optional)."""
    if typ is None or len(members(typ)) != 1:
        return None
    found = spmd_members(typ)
    return found[0] if len(found) == 1 else None


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
    merged = {axis: _merged(found) for axis, found in by_axis.items()}
    agreed = {axis: found for axis, found in merged.items() if found is not None}
    disagreeing = sorted(axis for axis, found in merged.items() if found is None)
    ordered = {axis: agreed[axis] for axis, _ in flat[0].axes if axis in agreed} if flat and flat[0] else {}
    return (TensorType.of(ordered) if ordered else None), disagreeing


def _merged(found: set[AxisType]) -> AxisType | None:
    """The one type several sites give an axis: equal, or ``S(i)`` where the others say ``V``.

    ``S(i)`` is ``V`` with a known shard dim (the same local type), so a
    parameter declared ``S(i)`` accepts a ``V`` argument.
    """
    if len(found) == 1:
        return next(iter(found))
    shards = {t for t in found if t.shard is not None}
    if len({t.local for t in found}) == 1 and len(shards) == 1:
        return next(iter(shards))
    return None


def _passes_none(site: Site) -> bool:
    """Whether the argument may be None (``None`` itself, or an ``Optional`` tensor such as ``self.bias``)."""
    return site.type is not None and any(isinstance(m, NoneType) for m in members(site.type))


def _tensor_or_none(site: Site) -> bool:
    """Whether the argument is a tensor, None, or a union of them (not ``float | Tensor``, not Any)."""
    return site.type is not None and all(
        isinstance(m, NoneType) or tensor_instance(m) is not None for m in members(site.type))


def _parameter(function: FunctionEvidence, name: str) -> tuple[Proposal | None, Todo | None]:
    passed = [call[name] for call in function.calls if name in call]
    target = Target(function.module, function.path, name)
    if not passed or not all(_tensor_or_none(s) for s in passed):
        return None, None  # never called, a call not yet typed, or not a tensor
    sites = [s for s in passed if s.type is not None and spmd_members(s.type)]
    if not sites:
        return None, None  # only ever None
    if any(any(m is None for m in spmd_members(s.type)) for s in sites if s.type is not None):
        return None, None
    agreed, disagreeing = _agreement(sites)
    todo = None
    if disagreeing or agreed is None:
        shown = ", ".join(f"{{{i}}} passes {_shown(s.type)}" for i, s in enumerate(sites))
        axes = ", ".join(disagreeing) or "every axis"
        todo = Todo(target, function.file, f"the call sites disagree on {axes} ({shown}); "
                    f"annotate {name} by hand (a Union, or one type the callers convert to)",
                    tuple((s.path, s.line) for s in sites))
    if agreed is None:
        return None, todo
    lines = frozenset(range(function.line, function.end_line + 1)) | {line for _, line in function.call_lines}
    optional = name in function.optional_params or any(_passes_none(s) for s in passed)
    annotation = SpmdType((agreed,), optional=optional)
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
        shown = ", ".join(f"{{{i}}} assigns {k}" for i, k in enumerate(known))
        return None, Todo(target, attribute.file, f"the assignments disagree ({shown}); annotate it by hand",
                          tuple((s.path, s.line) for s in sites))
    first = known[0]
    assert first is not None
    lines = frozenset(range(attribute.class_line, attribute.class_end_line + 1))
    return Proposal(target, SpmdType((first,)), attribute.file, lines), None


def _unsettled(site: Site) -> bool:
    """An argument whose type may still become known: Any (an untyped helper's result), an unknown tensor."""
    if site.type is None or isinstance(get_proper_type(site.type), AnyType):
        return True
    return any(t is None for t in spmd_members(site.type))


def _waiting(function: FunctionEvidence) -> bool:
    """Whether a parameter still lacking a type may get one later (a call site's argument not yet known)."""
    return any(_unsettled(call[name]) for name in function.untyped_params for call in function.calls if name in call)


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
        returned = None if pending or _waiting(function) else _return(function)
        if returned is not None and returned.target not in blocked:
            proposals.append(returned)
    for attribute in evidence.attributes.values():
        proposal, todo = _attribute(attribute)
        if proposal is not None and proposal.target not in blocked:
            proposals.append(proposal)
        if todo is not None:
            todos.append(todo)
    return proposals, todos
