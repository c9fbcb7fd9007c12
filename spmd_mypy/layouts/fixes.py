"""The one-attachment changes a layout problem's fix is chosen from.

A change rewrites one ``... .sharding_config = ...`` statement of the
checked module, in every world it runs in: first, for a ``local_map``
region whose result is a pending sum (``Partial()`` on the axis), the
gradients of the inputs it reads ``Replicate()`` with the gradient left out
taken as ``Partial()`` (each rank's gradient of such an input is its share
of the sum, whatever the body); then one type on the axis in
one of its input or output layouts, then a config another name holds at
the statement (``shared.w2.sharding_config = w2_config``), then another of
the module's config builders (each ``bool`` parameter bound to a ``bool``
parameter of the statement's function).  A config put in place declares
what the checks read of the one it replaces: its parameters' and its
output's layouts.
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass, replace
from typing import Any, Iterator

from spmd_mypy.layouts.program import Function, Program
from spmd_mypy.layouts.setters import Run
from spmd_mypy.layouts.values import Config, Layout, LocalMap, World
from spmd_mypy.plans.tree import source
from spmd_stubs.core import AxisType, Invariant, Kind, Partial, Replicate, Shard

_TRIED_TYPES = {"spmd.R": Replicate, "spmd.I": Invariant, "spmd.P": Partial, "spmd.S(-1)": Shard(-1),
                "spmd.S(0)": Shard(0), "spmd.S(1)": Shard(1)}
_FIELDS = ("in_dst_shardings", "in_src_shardings", "out_src_shardings", "out_dst_shardings")


@dataclass(frozen=True)
class Change:
    """A rewrite of one attachment statement: the statement, the change in words, the worlds with it."""

    node: ast.Assign
    words: str
    worlds: list[World]


def changes(program: Program, module: str, worlds: list[World], axis: str, involved: set[int]) -> Iterator[Change]:
    """The changes of the module's attachment statements among ``involved`` (by id), in the order they are
    tried: a type retyped, a config another name holds there, another builder."""
    statements = list({id(a.node): a for w in worlds for a in w.attachments.values()
                       if a.module == module and id(a.node) in involved}.values())
    for attachment in statements:
        summed: list[str] = []
        changed = _rewritten(worlds, attachment.node, lambda value: _summed_gradients(value, axis, summed))
        if changed is not None:
            names = dict.fromkeys(summed)
            others = ", each other input's as DTensor's default" if len(names) < len(_inputs_of(attachment.value)) \
                else ""
            yield Change(attachment.node, f"give the local_map of {attachment.written}.sharding_config "
                         f"in_grad_placements that take the gradients of {', '.join(names)} as "
                         f"{Partial.on(axis)} ({axis}=spmd.P){others}", changed)
    for attachment in statements:
        for field_name in _FIELDS:
            for text, axis_type in _TRIED_TYPES.items():
                changed = _rewritten(worlds, attachment.node, lambda value: _retyped(value, field_name, axis_type, axis))
                if changed is not None:
                    yield Change(attachment.node, f"declare {axis_type.on(axis)} in the {field_name} of "
                                 f"{attachment.written}.sharding_config ({axis}={text})", changed)
    for attachment in statements:
        for name in sorted({n for w in worlds for a in w.attachments.values() if a.node is attachment.node
                            for n, _ in a.configs}):
            changed = _rewritten(worlds, attachment.node, None, name)
            if changed is not None:
                yield Change(attachment.node, f"{attachment.written}.sharding_config = {name}", changed)
    builders = _builders(program, module)
    for attachment in statements:
        for builder in builders:
            yield from _rebuilt(program, worlds, attachment.node, attachment.written, builder)


def _builders(program: Program, module: str) -> list[Function]:
    """The module's functions whose parameters are all ``bool``s (config builders, flags bound by name)."""
    tree = source(program.api, module)
    found = []
    for statement in tree.body if tree is not None else ():
        if isinstance(statement, ast.FunctionDef):
            a = statement.args
            if all(isinstance(p.annotation, ast.Name) and p.annotation.id == "bool"
                   for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]):
                found.append(Function(module, statement))
    return found


def _rebuilt(program: Program, worlds: list[World], node: ast.Assign, written: str,
             builder: Function) -> Iterator[Change]:
    a = builder.node.args
    parameters = [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    in_scope = sorted({name for w in worlds for at in w.attachments.values() if at.node is node for name, _ in at.flags})
    for bound in itertools.product(in_scope, repeat=len(parameters)):
        pairs = list(zip(parameters, bound))

        def built(attachment_flags: dict[str, bool]) -> Any:
            run = Run(program, None, [], builder)
            return run.call(builder, [], {p: attachment_flags.get(f) for p, f in pairs})

        changed = []
        for world in worlds:
            attachments = {path: replace(at, value=built(dict(at.flags))) if at.node is node else at
                           for path, at in world.attachments.items()}
            if any(at.node is node and not _keeps_checks(attachments[path].value, at.value)
                   for path, at in world.attachments.items()):
                break
            changed.append(replace(world, attachments=attachments))
        else:
            arguments = ", ".join(f"{p}={f}" for p, f in pairs)
            yield Change(node, f"{written}.sharding_config = {builder.node.name}({arguments})", changed)


def _rewritten(worlds: list[World], node: ast.Assign, change: Any, name: str = "") -> list[World] | None:
    """The worlds with every value ``node`` attaches changed (by ``change``, else to the config ``name``
    held there); None where none changes, or ``name`` held none."""
    found, any_changed = [], False
    for world in worlds:
        attachments = {}
        for path, attachment in world.attachments.items():
            value = attachment.value
            if attachment.node is node and isinstance(value, Config):
                value = change(value) if change is not None else dict(attachment.configs).get(name)
                if not _keeps_checks(value, attachment.value):
                    return None
            any_changed |= value != attachment.value
            attachments[path] = replace(attachment, value=value)
        found.append(replace(world, attachments=attachments))
    return found if any_changed else None


def _inputs_of(config: Any) -> dict[str, Any]:
    """A config's inputs by name, as its ``local_map`` numbers them."""
    declared = config.get("in_dst_shardings") or config.get("in_src_shardings") if isinstance(config, Config) \
        else None
    return declared if isinstance(declared, dict) else {}


def _summed_gradients(config: Any, axis: str, summed: list[str]) -> Any:
    """A region whose result is ``Partial()`` on the axis, with the gradient of each input it reads
    ``Replicate()`` there and leaves out given as ``Partial()`` (their names added to ``summed``), every
    other gradient left out written as DTensor's default; the config as it is where none changes or a left
    out layout is not known."""
    region = config.get("local_map") if isinstance(config, Config) else None
    produced = config.get("out_src_shardings") if isinstance(config, Config) else None
    declared = _inputs_of(config)
    result = produced.on(axis) if isinstance(produced, Layout) else None
    if not isinstance(region, LocalMap) or not declared or result is None or result.kind is not Kind.P:
        return config
    given = region.gradients or ()
    gradients, names = [], []
    for index, (name, layout) in enumerate(declared.items()):
        gradient = given[index] if index < len(given) else None
        if gradient is not None:
            gradients.append(gradient)
            continue
        if not isinstance(layout, Layout):
            return config
        default = Layout(tuple((a, Replicate if t.kind is Kind.P else t) for a, t in layout.types))
        forward = layout.on(axis)
        read_whole = forward is not None and forward.kind in (Kind.R, Kind.I)
        gradients.append(_layout_with(default, Partial, axis) if read_whole else default)
        names += [name] if read_whole else []
    if not names:
        return config
    summed += names
    return config.replaced("local_map", LocalMap(tuple(gradients)))


def _keeps_checks(new: Any, old: Any) -> bool:
    """Whether ``new`` declares what the checks read of ``old``: its parameters and its output."""
    checked = {"state_shardings", "out_src_shardings"}
    return isinstance(new, Config) and isinstance(old, Config) and \
        {k for k, v in old.fields if v is not None} & checked <= {k for k, v in new.fields if v is not None}


def _retyped(config: Any, field_name: str, axis_type: AxisType, axis: str) -> Any:
    if not isinstance(config, Config):
        return config
    value = config.get(field_name)
    if isinstance(value, Layout):
        return config.replaced(field_name, _layout_with(value, axis_type, axis))
    if isinstance(value, dict):
        return config.replaced(field_name, {k: _layout_with(v, axis_type, axis) if isinstance(v, Layout) else v
                                            for k, v in value.items()})
    return config


def _layout_with(layout: Layout, axis_type: AxisType, axis: str) -> Layout:
    return Layout(tuple((name, axis_type if name == axis else t) for name, t in layout.types))
