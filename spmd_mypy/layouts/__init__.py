"""Layouts held as data (docs/spec.md#layouts-held-as-data): torchtitan's ``ShardingConfig``s checked
against the modules they are attached to.

A setter function ``set_dense_ffn_sharding(feed_forward_cfg, *, enable_sp)``
attaches layouts to a module config and its fields
(``feed_forward_cfg.w2.sharding_config = rowwise_config(output_sp=enable_sp)``).
Where mypy checks the module defining it (at its first ``ShardingConfig(...)``
call), the setter is run from source (:mod:`.values`) in each
configuration of its bool flags; its owner is each module class whose
``__init__`` builds every field it attaches to (``self.w2 =
config.w2.build()``), each field's class the one its ``Config``'s
annotation names; the owner's ``forward`` is evaluated with the attached
layouts (:mod:`.flow`).  A mismatch is an ``spmd-plan`` error at the
attachment the fix changes: another of the module's config builders, or
one layout's type on the axis, that leaves every configuration clean.
"""

from __future__ import annotations

import ast
import functools
import itertools
from dataclasses import replace
from typing import Any, Iterator

from mypy.checker import TypeChecker
from mypy.nodes import Context, MypyFile, TypeInfo, Var
from mypy.plugin import FunctionContext
from mypy.types import Instance, Type, get_proper_type

from spmd_mypy import errorcodes, report
from spmd_mypy.build_state import state_of
from spmd_mypy.fullnames import MODULE
from spmd_mypy.layouts.flow import LayoutFlow
from spmd_mypy.layouts.values import Config, Evaluator, Layout, Setter, attachment_path
from spmd_mypy.plans.tree import Node, method, source
from spmd_mypy.sources import SourceFiles, SourceUnreadable
from spmd_stubs.core import AxisType, Invariant, Partial, Replicate, Shard

SHARDING_CONFIG = "torchtitan.protocols.sharding.ShardingConfig"
AXIS = "tp"
_TRIED_TYPES = {"spmd.R": Replicate, "spmd.I": Invariant, "spmd.P": Partial, "spmd.S(-1)": Shard(-1),
                "spmd.S(0)": Shard(0), "spmd.S(1)": Shard(1)}


def sharding_config_hook(ctx: FunctionContext) -> Type:
    """A ``ShardingConfig(...)`` call: check the setter function around it, once."""
    api = ctx.api
    function = api.scope.current_function() if isinstance(api, TypeChecker) else None
    if function is None or not isinstance(api, TypeChecker):
        return ctx.default_return_type
    module = api.modules.get(api.tree.fullname)
    checked = state_of(api).layout_setters
    if module is None or (module.path, function.line) in checked:
        return ctx.default_return_type
    checked.add((module.path, function.line))
    tree = source(api, module.fullname)
    found = [s for s in tree.body if isinstance(s, ast.FunctionDef) and s.lineno <= function.line
             <= (s.end_lineno or s.lineno)] if tree is not None else []
    if tree is not None and found:
        _check_setter(api, module, tree, found[0])
    return ctx.default_return_type


def attaches_layouts(tree: MypyFile, sources: SourceFiles) -> bool:
    """Whether a freshly parsed module may attach layouts (read from its text: mypy writes a module's
    cache entry before checking it)."""
    try:
        return any(".sharding_config =" in line for line in sources.lines(tree))
    except (SourceUnreadable, UnicodeDecodeError):
        return False


def _flags(function: ast.FunctionDef) -> list[str]:
    return [a.arg for a in [*function.args.args[1:], *function.args.kwonlyargs]
            if isinstance(a.annotation, ast.Name) and a.annotation.id == "bool"]


def _configurations(function: ast.FunctionDef) -> list[dict[str, bool]]:
    flags = _flags(function)
    return [dict(zip(flags, values)) for values in itertools.product((True, False), repeat=len(flags))]


def _check_setter(api: TypeChecker, module: MypyFile, tree: ast.Module, function: ast.FunctionDef) -> None:
    configurations = _configurations(function)
    positional = [*function.args.posonlyargs, *function.args.args]
    if not positional:
        return
    parameter = positional[0].arg
    paths = {path for node in ast.walk(function) if isinstance(node, ast.Assign) and len(node.targets) == 1
             for path in [attachment_path(node.targets[0], parameter)] if path is not None}
    if not any(paths - {""}):
        return
    names = {path: f"{parameter}.{path}" if path else parameter for path in paths}
    for owner in _owners(api, {path.split(".")[0] for path in paths if path}):
        evaluator = Evaluator(tree, functools.partial(_is_instance, api, module, owner))
        setters = [evaluator.setter(function, flags) for flags in configurations]
        root = _root(api, owner, paths)
        messages = _problems(api, root, setters, names)
        if messages:
            _report(api, root, function, evaluator, configurations, setters, names, messages)


def _problems(api: TypeChecker, root: Node, setters: list[Setter | None], names: dict[str, str]) -> dict[str, list[int]]:
    """Each problem's message and the indexes of the configurations it occurs in."""
    found: dict[str, list[int]] = {}
    for index, setter in enumerate(setters):
        if setter is None:
            continue
        configs = {path: a.value for path, a in setter.attachments.items() if isinstance(a.value, Config)}
        flow = LayoutFlow(api, AXIS, configs, names)
        flow.run_owner(root)
        for problem in flow.problems:
            found.setdefault(problem.message, []).append(index)
    return found


def _report(api: TypeChecker, root: Node, function: ast.FunctionDef, evaluator: Evaluator,
            configurations: list[dict[str, bool]], setters: list[Setter | None], names: dict[str, str],
            messages: dict[str, list[int]]) -> None:
    """Each problem at the attachment its fix changes; problems one fix removes together, once."""
    fix = next((f for f in _fixes(function, evaluator, configurations, setters)
                if not _problems(api, root, f[2], names)), None)
    reported = list(messages.items())[:1] if fix is not None else list(messages.items())
    for message, indexes in reported:
        shown = " and ".join("(" + ", ".join(f"{k}={v}" for k, v in configurations[i].items()) + ")"
                             for i in indexes)
        if fix is not None:
            path, change, _ = fix
            advice = f"Fix: {change}"
            node = next(s.attachments[path].node for s in setters if s is not None and path in s.attachments)
        else:
            advice = f"Fix: make the layouts {function.name} attaches agree"
            node = next(a.node for s in setters if s is not None for a in s.attachments.values())
        more = f" (and {len(messages) - 1} more this fix removes)" if fix is not None and len(messages) > 1 else ""
        report.fail(api, Context(node.lineno, node.col_offset),
                    f"With the layouts {function.name} attaches {shown}, {message}{more}. {advice}.",
                    errorcodes.PLAN)


def _fixes(function: ast.FunctionDef, evaluator: Evaluator, configurations: list[dict[str, bool]],
           setters: list[Setter | None]) -> Iterator[tuple[str, str, list[Setter | None]]]:
    """(attachment path, the change in words, the setters' runs with it) for each one-attachment change
    that declares at least what the attachment declared: first one type on the axis in one of its input
    or output layouts, then another of the module's config builders (its bool parameters bound to the
    setter's flags)."""
    parameter = [*function.args.posonlyargs, *function.args.args][0].arg
    paths = sorted({p for s in setters if s is not None for p in s.attachments})
    attached = {p: f"{parameter}.{p}" if p else parameter for p in paths}
    for path in paths:
        for field_name in ("in_dst_shardings", "in_src_shardings", "out_src_shardings", "out_dst_shardings"):
            for text, axis_type in _TRIED_TYPES.items():
                changed = [_with(s, path, _retyped(s.attachments[path].value, field_name, axis_type))
                           if s is not None and path in s.attachments else s for s in setters]
                if changed != setters:
                    yield path, (f"declare {axis_type.on(AXIS)} in the {field_name} of "
                                 f"{attached[path]}.sharding_config (tp={text})"), changed
    flags = _flags(function)
    for path in paths:
        for name, builder in evaluator.functions.items():
            params = [a.arg for a in [*builder.args.args, *builder.args.kwonlyargs]]
            if name == function.name or any(not (isinstance(a.annotation, ast.Name) and a.annotation.id == "bool")
                                            for a in [*builder.args.args, *builder.args.kwonlyargs]):
                continue
            for bound in itertools.product(flags, repeat=len(params)):
                pairs = list(zip(params, bound))
                changed = [_with(s, path, evaluator.call(name, [], {p: given[f] for p, f in pairs}))
                           for s, given in zip(setters, configurations)]
                if all(_declares_as_much(s.attachments[path].value, old.attachments[path].value)
                       for s, old in zip(changed, setters) if s is not None and old is not None
                       and path in s.attachments):
                    arguments = ", ".join(f"{p}={f}" for p, f in pairs)
                    yield path, f"{attached[path]}.sharding_config = {name}({arguments})", changed


def _declares_as_much(new: Any, old: Any) -> bool:
    return isinstance(new, Config) and isinstance(old, Config) and \
        {k for k, v in old.fields if v is not None} <= {k for k, v in new.fields if v is not None}


def _with(setter: Setter | None, path: str, value: Any) -> Setter | None:
    if setter is None or path not in setter.attachments:
        return setter
    return Setter({**setter.attachments, path: replace(setter.attachments[path], value=value)})


def _retyped(config: Any, field_name: str, axis_type: AxisType) -> Any:
    if not isinstance(config, Config):
        return config
    value = config.get(field_name)
    if isinstance(value, Layout):
        value = _layout_with(value, axis_type)
    elif isinstance(value, dict):
        value = {k: _layout_with(v, axis_type) if isinstance(v, Layout) else v for k, v in value.items()}
    else:
        return config
    return Config(tuple((k, value if k == field_name else v) for k, v in config.fields))


def _layout_with(layout: Layout, axis_type: AxisType) -> Layout:
    return Layout(tuple((axis, axis_type if axis == AXIS else t) for axis, t in layout.types))


def _owners(api: TypeChecker, fields: set[str]) -> list[TypeInfo]:
    """The module classes whose ``__init__``s build every field as ``self.f = config.f.build()``."""
    owners = []
    for tree in list(api.modules.values()):
        for symbol in tree.names.values():
            info = symbol.node
            if isinstance(info, TypeInfo) and info.module_name == tree.fullname and info.has_base(MODULE) \
                    and fields <= _built(api, info):
                owners.append(info)
    return owners


def _built(api: TypeChecker, info: TypeInfo) -> set[str]:
    built: set[str] = set()
    for base in info.mro:
        if base.fullname.startswith("torch.") or "__init__" not in base.names:
            continue
        found = method(api, base, "__init__")
        for statement in ast.walk(found[1]) if found is not None else ():
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target, value = statement.targets[0], statement.value
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                        and target.value.id == "self" and ast.unparse(value) == f"config.{target.attr}.build()":
                    built.add(target.attr)
    return built


def _root(api: TypeChecker, owner: TypeInfo, paths: set[str]) -> Node:
    """The owner and the fields it builds, each of the class its ``Config`` field's annotation names."""
    root = Node("", owner)
    config = owner.get("Config")
    for path in sorted(p for p in paths if p and "." not in p):
        var = config.node.get(path) if config is not None and isinstance(config.node, TypeInfo) else None
        typed = get_proper_type(var.node.type) if var is not None and isinstance(var.node, Var) and var.node.type \
            else None
        outer = typed.type.fullname.rpartition(".")[0] if isinstance(typed, Instance) else ""
        root.children[path] = Node(path, _class_named(api, outer))
    return root


def _class_named(api: TypeChecker, fullname: str) -> TypeInfo | None:
    module, _, name = fullname.rpartition(".")
    tree = api.modules.get(module)
    symbol = tree.names.get(name) if tree is not None else None
    return symbol.node if symbol is not None and isinstance(symbol.node, TypeInfo) else None


def _is_instance(api: TypeChecker, module: MypyFile, owner: TypeInfo, dotted: str) -> bool | None:
    """Whether the owner's ``Config`` is an instance of the class ``dotted`` names in ``module``."""
    first, *rest = dotted.split(".")
    symbol = module.names.get(first)
    node = symbol.node if symbol is not None else None
    for name in rest:
        inner = node.get(name) if isinstance(node, TypeInfo) else None
        node = inner.node if inner is not None else None
    config = owner.get("Config")
    if not isinstance(node, TypeInfo) or config is None or not isinstance(config.node, TypeInfo):
        return None
    return config.node.has_base(node.fullname)
