"""Layouts held as data, evaluated from source: the functions that build ``ShardingConfig``s from flags.

A small interpreter over :mod:`ast` for the pure functions of one module
(torchtitan's ``decoder_sharding``): literal dicts, calls of the module's
own functions with keyword arguments and defaults, conditional
expressions, ``spmd.R``/``I``/``P``/``V``/``S(d)``, ``MeshAxisName``
members, ``SpmdLayout({axis: type}, partition_spec=...)`` and
``ShardingConfig(field=...)``.  A flag is a literal bool each
configuration fixes; anything else is :data:`UNKNOWN`, which decides no
branch and no type.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from spmd_stubs.core import AxisType, Invariant, Kind, Partial, Replicate, Shard, Varying


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()
TYPES = {"R": Replicate, "I": Invariant, "P": Partial, "V": Varying}
FIELDS = ("state_shardings", "in_src_shardings", "in_dst_shardings", "out_src_shardings", "out_dst_shardings",
          "local_map")


@dataclass(frozen=True)
class Layout:
    """An ``SpmdLayout``: each mesh axis's type (a ``V`` in the partition spec is a shard of its dim)."""

    types: tuple[tuple[str, AxisType], ...]

    def on(self, axis: str) -> AxisType | None:
        return dict(self.types).get(axis)


@dataclass(frozen=True)
class Config:
    """A ``ShardingConfig``: its fields as written (absent ones are None)."""

    fields: tuple[tuple[str, Any], ...]

    def get(self, name: str) -> Any:
        return dict(self.fields).get(name)


@dataclass(frozen=True)
class Attachment:
    """``<parameter>.<path>.sharding_config = <value>`` in a setter function (``path`` "" for the parameter's
    own module)."""

    path: str
    value: Any
    node: ast.Assign


@dataclass
class Setter:
    """One run of a setter function in one configuration: what it attaches, and to which parameter."""

    attachments: dict[str, Attachment] = field(default_factory=dict)


class Evaluator:
    """The module-level functions and names of one parsed module, evaluated on demand."""

    def __init__(self, module: ast.Module, is_instance: Callable[[str], bool | None]) -> None:
        """``is_instance``: whether the setter's module parameter is an instance of the class a dotted name
        names (``FusedQKVLinear.Config``); None where that is not known."""
        self.functions = {s.name: s for s in module.body if isinstance(s, ast.FunctionDef)}
        self.assigned = {s.targets[0].id: s.value for s in module.body if isinstance(s, ast.Assign)
                         and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)}
        self.is_instance = is_instance
        self._depth = 0
        self._parameter = ""

    def setter(self, function: ast.FunctionDef, flags: Mapping[str, bool]) -> Setter | None:
        """Run a setter whose first parameter is the module config, its other parameters ``flags`` or their
        defaults; None where it does something not modelled that may change what it attaches."""
        params = [*function.args.posonlyargs, *function.args.args]
        if not params:
            return None
        env: dict[str, Any] = {a.arg: flags.get(a.arg, UNKNOWN) for a in [*params[1:], *function.args.kwonlyargs]}
        env[params[0].arg] = _MODULE
        self._parameter = params[0].arg
        found = Setter()
        return found if self._block(function.body, env, found) else None

    def _block(self, body: list[ast.stmt], env: dict[str, Any], found: Setter) -> bool:
        for statement in body:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target, value = statement.targets[0], self.expr(statement.value, env)
                path = attachment_path(target, self._parameter)
                if isinstance(target, ast.Name):
                    env[target.id] = value
                elif path is not None:
                    found.attachments[path] = Attachment(path, value, statement)
                else:  # a config changed in place (``cfg.w2.sharding_config.out_dst_shardings = ...``)
                    return False
            elif isinstance(statement, ast.Expr):
                self._handed_on(statement.value, found)
            elif isinstance(statement, ast.If):
                test = self.expr(statement.test, env)
                if not isinstance(test, bool):
                    return False
                if not self._block(statement.body if test else statement.orelse, env, found):
                    return False
            elif isinstance(statement, ast.Raise | ast.Return):
                return False
            elif not isinstance(statement, ast.Assert | ast.Pass):
                return False
        return True

    def _handed_on(self, expression: ast.expr, found: Setter) -> None:
        """A call handed the module config or one of its fields may attach layouts under it: what was
        attached there is no longer known."""
        for node in ast.walk(expression):
            if isinstance(node, ast.Call):
                for argument in [*node.args, *(k.value for k in node.keywords)]:
                    under = _field_path(argument, self._parameter)
                    if under is not None:
                        found.attachments = {path: a for path, a in found.attachments.items()
                                             if under and path != under and not path.startswith(f"{under}.")}

    def call(self, name: str, args: list[Any], keywords: Mapping[str, Any]) -> Any:
        function = self.functions.get(name)
        if function is None or self._depth > 8:
            return UNKNOWN
        a = function.args
        positional = [*a.posonlyargs, *a.args]
        env: dict[str, Any] = {}
        defaults = dict(zip([p.arg for p in positional][len(positional) - len(a.defaults):], a.defaults))
        defaults |= {p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None}
        for index, parameter in enumerate([*positional, *a.kwonlyargs]):
            if index < len(positional) and index < len(args):
                env[parameter.arg] = args[index]
            elif parameter.arg in keywords:
                env[parameter.arg] = keywords[parameter.arg]
            elif parameter.arg in defaults:
                env[parameter.arg] = self.expr(defaults[parameter.arg], {})
            else:
                return UNKNOWN
        self._depth += 1
        try:
            return self._returned(function.body, env)
        finally:
            self._depth -= 1

    def _returned(self, body: list[ast.stmt], env: dict[str, Any]) -> Any:
        for statement in body:
            if isinstance(statement, ast.Return):
                return self.expr(statement.value, env) if statement.value is not None else None
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(
                    statement.targets[0], ast.Name):
                env[statement.targets[0].id] = self.expr(statement.value, env)
            elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.value:
                env[statement.target.id] = self.expr(statement.value, env)
            elif not isinstance(statement, ast.Expr | ast.Pass):
                return UNKNOWN
        return UNKNOWN

    def expr(self, node: ast.expr, env: dict[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if node.id in self.assigned:
                return self.expr(self.assigned[node.id], {})
            return UNKNOWN
        if isinstance(node, ast.Tuple):
            return tuple(self.expr(e, env) for e in node.elts)
        if isinstance(node, ast.Dict):
            keys = [self.expr(k, env) if k is not None else UNKNOWN for k in node.keys]
            if any(not isinstance(k, str) for k in keys):
                return UNKNOWN
            return {k: self.expr(v, env) for k, v in zip(keys, node.values)}
        if isinstance(node, ast.IfExp):
            test = self.expr(node.test, env)
            return self.expr(node.body if test else node.orelse, env) if isinstance(test, bool) else UNKNOWN
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            value = self.expr(node.operand, env)
            return -value if isinstance(value, int) else UNKNOWN
        if isinstance(node, ast.Attribute):
            dotted = ast.unparse(node)
            if dotted.startswith("MeshAxisName."):
                return node.attr.lower()
            if dotted.startswith("spmd.") and node.attr in TYPES:
                return TYPES[node.attr]
            value = self.expr(node.value, env)
            if isinstance(value, Config) and node.attr in FIELDS:
                return value.get(node.attr)
            return UNKNOWN
        if isinstance(node, ast.Call):
            return self._call(node, env)
        return UNKNOWN

    def _call(self, node: ast.Call, env: dict[str, Any]) -> Any:
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return UNKNOWN
        callee = ast.unparse(node.func)
        if callee == "isinstance" and len(node.args) == 2 and self.expr(node.args[0], env) is _MODULE:
            answer = self.is_instance(ast.unparse(node.args[1]))
            return UNKNOWN if answer is None else answer
        args = [self.expr(a, env) for a in node.args]
        keywords = {k.arg: self.expr(k.value, env) for k in node.keywords if k.arg is not None}
        if callee == "spmd.S" and len(args) == 1 and isinstance(args[0], int):
            return Shard(args[0])
        if callee == "SpmdLayout" and len(args) == 1 and isinstance(args[0], dict):
            return _layout(args[0], keywords.get("partition_spec"))
        if callee == "ShardingConfig" and not args and set(keywords) <= set(FIELDS):
            return Config(tuple(sorted(keywords.items(), key=lambda item: FIELDS.index(item[0]))))
        if isinstance(node.func, ast.Name):
            return self.call(node.func.id, args, keywords)
        return UNKNOWN


class _ModuleParameter:
    def __repr__(self) -> str:
        return "<the setter's module config>"


_MODULE: Any = _ModuleParameter()


def attachment_path(target: ast.expr, parameter: str) -> str | None:
    """``cfg.a.b.sharding_config`` with ``cfg`` the setter's module parameter ``parameter``: ``"a.b"``."""
    if not (isinstance(target, ast.Attribute) and target.attr == "sharding_config"):
        return None
    return _field_path(target.value, parameter)


def _field_path(node: ast.expr, parameter: str) -> str | None:
    """``cfg.a.b`` with ``cfg`` named ``parameter``: ``"a.b"`` (``""`` for ``cfg`` itself)."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.insert(0, node.attr)
        node = node.value
    return ".".join(names) if isinstance(node, ast.Name) and node.id == parameter else None


def _layout(types: Mapping[str, Any], spec: Any) -> Any:
    """A layout; a ``V`` whose axis the partition spec places at one dim is a shard of that dim."""
    found: list[tuple[str, AxisType]] = []
    for axis, value in types.items():
        if not isinstance(value, AxisType):
            return UNKNOWN
        if value.kind is Kind.V and value.shard is None and isinstance(spec, tuple):
            dims = [d for d, entry in enumerate(spec) if entry == axis or isinstance(entry, tuple) and axis in entry]
            value = Shard(dims[0]) if len(dims) == 1 else value
        found.append((axis, value))
    return Layout(tuple(found))
