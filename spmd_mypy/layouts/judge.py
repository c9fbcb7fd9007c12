"""A setter's worlds judged: each world's attached layouts run through its modules (:mod:`.flow`).

A world's modules form a tree: its setter's config at the root, then every
config a layout is attached to and those above it, each a module of the
class its config's class is nested in.  A module's child is the attribute
its ``__init__`` builds from the config's field (``self.wk =
config.wkv.build()``: the layout attached to ``wkv`` is ``wk``'s), else the
attribute of the field's name.  A module whose layout is attached as
``None`` declares no contract here (a fused module runs its collectives
inside): it is not followed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mypy.checker import TypeChecker

from spmd_mypy.layouts.flow import DTENSOR, SPMD_TYPES, LayoutFlow
from spmd_mypy.layouts.program import Program, built
from spmd_mypy.layouts.setters import config_class
from spmd_mypy.layouts.values import Config, LocalMap, World
from spmd_mypy.plans.tree import Node

AXIS = "tp"


@dataclass
class Judged:
    """What the worlds' evaluations found: each problem's message with the indexes of its worlds, and why
    each attachment statement (by id) whose layout no world checks is not checked."""

    problems: dict[str, list[int]] = field(default_factory=dict)
    unchecked: dict[int, str] = field(default_factory=dict)


def evaluate_worlds(api: TypeChecker, found: list[World], strict: bool) -> Judged:
    judged = Judged()
    checked: set[int] = set()
    for index, world in enumerate(found):
        root, evaluated = flows(api, world, strict)
        nodes = {node.path: node for node in root.walk()}
        for flow in evaluated:
            for problem in flow.problems:
                if index not in judged.problems.setdefault(problem.message, []):
                    judged.problems[problem.message].append(index)
            for path, attachment in world.attachments.items():
                if not isinstance(attachment.value, Config):
                    continue
                if path in flow.called and path not in flow.unfollowed:
                    checked.add(id(attachment.node))
                node = nodes.get(path)
                judged.unchecked.setdefault(id(attachment.node), flow.unfollowed.get(path) or (
                    f"no forward the checker evaluates calls {node.info.name}" if node is not None and node.info
                    else "its module's class is not known"))
    judged.unchecked = {statement: why for statement, why in judged.unchecked.items() if statement not in checked}
    return judged


def clean(api: TypeChecker, found: list[World], allowed: set[str]) -> bool:
    """Whether every world's strict evaluation finds nothing but the ``allowed`` problems."""
    return all(problem.message in allowed for world in found for flow in flows(api, world, strict=True)[1]
               for problem in flow.problems)


def flows(api: TypeChecker, world: World, strict: bool) -> tuple[Node, list[LayoutFlow]]:
    """The world's modules, and its layouts evaluated through them (once per ``local_map`` reading where it
    attaches a region)."""
    configs = {path: a.value for path, a in world.attachments.items() if isinstance(a.value, Config)}
    silent = {path for path, a in world.attachments.items() if a.value is None}
    names = {path: a.written for path, a in world.attachments.items()}
    regions = any(isinstance(c.get("local_map"), LocalMap) for c in configs.values())
    root = tree(api, world)
    found = []
    for backend in (DTENSOR, SPMD_TYPES) if regions else (DTENSOR,):
        flow = LayoutFlow(api, AXIS, configs, names, strict, backend, silent)
        flow.run(root)
        found.append(flow)
    return root, found


def tree(api: TypeChecker, world: World) -> Node:
    """The world's modules (module docstring)."""
    program = Program(api)
    paths = {".".join(path.split(".")[:length]) for path in world.attachments if path
             for length in range(1, path.count(".") + 2)}

    def node(path: str) -> Node:
        found = Node(path, program.module_class(config_class(world.classes, path)[0]))
        prefix = f"{path}." if path else ""
        fields = {p[len(prefix):] for p in paths if p.startswith(prefix) and "." not in p[len(prefix):]}
        attributes = built(api, found.info) if found.info is not None else {}
        for attribute, name in [*((a, f) for a, f in attributes.items() if f in fields),
                                *((f, f) for f in fields - set(attributes.values()))]:
            found.children[attribute] = node(prefix + name)
        return found

    return node("")
