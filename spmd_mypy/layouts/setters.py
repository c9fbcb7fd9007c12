"""Setters run from source: what a function attaches to the module config it is handed, in every world.

A setter's first parameter is a module config; every ``bool`` parameter
is a flag, and each run fixes a value of each.  The interpreter follows
assignments (tuples unpacked), literal dicts and tuples (dict
comprehensions over them included), conditional expressions, ``if``s,
``assert``s, the module's and imported functions called with keyword
arguments and defaults (a setter's callee attaching to the config it is
handed: ``set_dense_ffn_sharding(layer_cfg.feed_forward, ...)``), and a
``for`` over a config's list (``for layer_cfg in config.layers``: one run of
the body for every item, ``layers.*``).  A test on a config is decided by
what its class allows, else both ways, each a world of its own:
``isinstance(cfg.wo, RowParallelLinear.Config)`` by the field's annotated
class, ``cfg.rope is not None`` by whether the annotation admits None.  A
``raise`` (and an ``assert`` that fails) ends a world: no configuration
reaches it.  A statement the interpreter cannot follow is recorded
(:class:`~.values.Unevaluated`) and skipped; a call it cannot follow that
is handed a config forgets what was attached under it.
"""

from __future__ import annotations

import ast
from typing import Any

from mypy.nodes import TypeInfo

from spmd_mypy.layouts.program import Function, Program, field_class
from spmd_mypy.layouts.values import (
    TYPES,
    UNKNOWN,
    Attachment,
    Config,
    ConfigRef,
    Unevaluated,
    World,
    construct,
)

RUNS = 256
"""The most worlds one setter is run in: past it, the setter is not evaluated."""
_DEPTH = 16


class Impossible(Exception):
    """The run reached a ``raise``: no configuration takes this way."""


class _Skipped(Exception):
    """A statement the interpreter cannot follow (recorded as unevaluated)."""


def worlds(program: Program, function: Function, root: TypeInfo | None) -> list[World] | None:
    """Every world of ``function`` with its first parameter a config of class ``root`` (None: not known);
    None where there are more than :data:`RUNS`."""
    pending: list[list[bool]] = [[]]
    found: list[World] = []
    runs = 0
    while pending:
        choices = pending.pop()
        runs += 1
        if runs > RUNS:
            return None
        run = Run(program, root, choices, function)
        try:
            run.setter()
            found.append(run.world)
        except Impossible:
            pass
        pending.extend(run.taken[:index] + [False] for index in range(len(choices), len(run.taken)))
    return found


def attaches(program: Program, function: Function, seen: set[tuple[str, str]] | None = None) -> bool:
    """Whether ``function`` attaches layouts: itself, or a function it calls."""
    seen = set() if seen is None else seen
    if (function.module, function.node.name) in seen:
        return False
    seen.add((function.module, function.node.name))
    for node in ast.walk(function.node):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "sharding_config"
                                                for t in node.targets):
            return True
        callee = program.function(function.module, node.func.id) \
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else None
        if callee is not None and attaches(program, callee, seen):
            return True
    return False


def flags(function: ast.FunctionDef) -> list[str]:
    """A setter's flags: its ``bool`` parameters after the config."""
    a = function.args
    return [p.arg for p in [*a.posonlyargs, *a.args][1:] + a.kwonlyargs
            if isinstance(p.annotation, ast.Name) and p.annotation.id == "bool"]


class Run:
    """One run of a setter, its undecided tests taken as ``choices`` says (then True), into :attr:`world`."""

    def __init__(self, program: Program, root: TypeInfo | None, choices: list[bool], function: Function) -> None:
        self.program, self.choices, self.function = program, choices, function
        self.world = World(classes={"": root} if root is not None else {})
        self.taken: list[bool] = []
        self._depth = 0
        self._anchor: ast.stmt | None = None
        self._parameters: set[str] = set()
        """The parameters of the function running (a fix's builder is handed its bools)."""

    def decide(self) -> bool:
        value = self.choices[len(self.taken)] if len(self.taken) < len(self.choices) else True
        self.taken.append(value)
        return value

    def setter(self) -> None:
        node = self.function.node
        positional = [*node.args.posonlyargs, *node.args.args]
        env: dict[str, Any] = {p.arg: UNKNOWN for p in [*positional, *node.args.kwonlyargs]}
        env[positional[0].arg] = ConfigRef("")
        for flag in flags(node):
            env[flag] = self.world.flags[flag] = self.decide()
        self._parameters = set(env)
        self._body(node.body, self.function.module, env)

    # --- statements ---

    def _body(self, body: list[ast.stmt], module: str, env: dict[str, Any]) -> Any:
        """Run a function body; what it returns."""
        try:
            self._block(body, module, env)
        except _Returned as returned:
            return returned.value
        return None

    def _block(self, body: list[ast.stmt], module: str, env: dict[str, Any]) -> None:
        for statement in body:
            outer = self._anchor
            self._anchor = outer or statement
            try:
                self._statement(statement, module, env)
            except _Skipped as skipped:
                self._unevaluated(str(skipped))
            finally:
                self._anchor = outer

    def _statement(self, statement: ast.stmt, module: str, env: dict[str, Any]) -> None:
        if isinstance(statement, ast.Assign):
            value = self.expr(statement.value, module, env)
            for target in statement.targets:
                self._assign(target, value, statement, module, env)
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            self._assign(statement.target, self.expr(statement.value, module, env), None, module, env)
        elif isinstance(statement, ast.Expr):
            self.expr(statement.value, module, env)
        elif isinstance(statement, ast.If):
            self._if(statement, module, env)
        elif isinstance(statement, ast.For):
            self._for(statement, module, env)
        elif isinstance(statement, ast.Assert):
            if self.truth(self.expr(statement.test, module, env)) is False:
                raise Impossible
        elif isinstance(statement, ast.Raise):
            raise Impossible
        elif isinstance(statement, ast.Return):
            raise _Returned(self.expr(statement.value, module, env) if statement.value is not None else None)
        elif not isinstance(statement, (ast.Pass, ast.AnnAssign, ast.Import, ast.ImportFrom)):
            raise _Skipped(f"a `{type(statement).__name__.lower()}` statement")

    def _assign(self, target: ast.expr, value: Any, statement: ast.Assign | None, module: str,
                env: dict[str, Any]) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = value if isinstance(value, tuple) and len(value) == len(target.elts) else None
            for index, element in enumerate(target.elts):
                self._assign(element, items[index] if items is not None else UNKNOWN, statement, module, env)
        elif isinstance(target, ast.Attribute):
            owner = self.expr(target.value, module, env)
            if isinstance(owner, ConfigRef) and target.attr == "sharding_config" and statement is not None:
                self._attach(owner.path, value, statement, module, env)
            elif isinstance(owner, (ConfigRef, Config)):
                raise _Skipped(f"`{ast.unparse(target)}` changed in place")

    def _attach(self, path: str, value: Any, statement: ast.Assign, module: str, env: dict[str, Any]) -> None:
        self.world.attachments.pop(path, None)
        if value is UNKNOWN:
            raise _Skipped(f"the layout `{ast.unparse(statement.value)}` attached to "
                           f"`{ast.unparse(statement.targets[0])}`")
        assert self._anchor is not None
        self.world.attachments[path] = Attachment(
            path, value, statement, module, self._anchor,
            tuple((k, v) for k, v in env.items() if isinstance(v, bool) and k in self._parameters),
            tuple((k, v) for k, v in env.items() if isinstance(v, Config)))

    def _if(self, statement: ast.If, module: str, env: dict[str, Any]) -> None:
        test = self.truth(self.expr(statement.test, module, env))
        if isinstance(test, bool):
            self._block(statement.body if test else statement.orelse, module, env)
        elif _raises(statement.body):  # a check whose failing world does not exist
            self._block(statement.orelse, module, env)
        elif _raises(statement.orelse):
            self._block(statement.body, module, env)
        else:
            raise _Skipped(f"the test `{ast.unparse(statement.test)}`")

    def _for(self, statement: ast.For, module: str, env: dict[str, Any]) -> None:
        items = self.expr(statement.iter, module, env)
        if isinstance(items, ConfigRef):
            items = (items.child("*"),)
        if not isinstance(items, tuple) or statement.orelse:
            raise _Skipped(f"the loop over `{ast.unparse(statement.iter)}`")
        for item in items:
            self._assign(statement.target, item, None, module, env)
            self._block(statement.body, module, env)

    def _unevaluated(self, reason: str) -> None:
        assert self._anchor is not None
        where = placed(self._anchor)
        self.world.unevaluated.append(Unevaluated(where.lineno, where.col_offset, reason))

    # --- expressions ---

    def expr(self, node: ast.expr, module: str, env: dict[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self._name(node.id, module, env)
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self.expr(e, module, env) for e in node.elts)
        if isinstance(node, ast.Dict):
            keys = [self.expr(k, module, env) if k is not None else UNKNOWN for k in node.keys]
            if any(not isinstance(k, str) for k in keys):
                return UNKNOWN
            return {k: self.expr(v, module, env) for k, v in zip(keys, node.values)}
        if isinstance(node, ast.DictComp):
            return self._dict_comprehension(node, module, env)
        if isinstance(node, ast.IfExp):
            test = self.expr(node.test, module, env)
            test = self.truth(test)
            return self.expr(node.body if test else node.orelse, module, env) if isinstance(test, bool) else UNKNOWN
        if isinstance(node, ast.UnaryOp):
            value = self.expr(node.operand, module, env)
            if isinstance(node.op, ast.Not):
                value = self.truth(value)
                return not value if isinstance(value, bool) else UNKNOWN
            return -value if isinstance(node.op, ast.USub) and type(value) is int else UNKNOWN
        if isinstance(node, ast.BoolOp):
            return self._bool_op(node, module, env)
        if isinstance(node, ast.Compare):
            return self._compare(node, module, env)
        if isinstance(node, ast.Attribute):
            return self._attribute(node, module, env)
        if isinstance(node, ast.Subscript):
            return _item(self.expr(node.value, module, env), self.expr(node.slice, module, env))
        if isinstance(node, ast.Call):
            return self._call(node, module, env)
        return UNKNOWN

    def _name(self, name: str, module: str, env: dict[str, Any]) -> Any:
        if name in env:
            return env[name]
        found = self.program.constant(module, name)
        return self.expr(found[1], found[0], {}) if found is not None else UNKNOWN

    def _dict_comprehension(self, node: ast.DictComp, module: str, env: dict[str, Any]) -> Any:
        if len(node.generators) != 1 or node.generators[0].ifs or node.generators[0].is_async:
            return UNKNOWN
        generator = node.generators[0]
        items = self.expr(generator.iter, module, env)
        if isinstance(items, dict):
            items = tuple(items)
        if not isinstance(items, tuple):
            return UNKNOWN
        found = {}
        for item in items:
            inner = dict(env)
            self._assign(generator.target, item, None, module, inner)
            key = self.expr(node.key, module, inner)
            if not isinstance(key, str):
                return UNKNOWN
            found[key] = self.expr(node.value, module, inner)
        return found

    def _bool_op(self, node: ast.BoolOp, module: str, env: dict[str, Any]) -> Any:
        stop = isinstance(node.op, ast.Or)
        for operand in node.values:
            value = self.truth(self.expr(operand, module, env))
            if not isinstance(value, bool):
                return UNKNOWN
            if value is stop:
                return value
        return not stop

    def _compare(self, node: ast.Compare, module: str, env: dict[str, Any]) -> Any:
        if len(node.ops) != 1:
            return UNKNOWN
        left, right = self.expr(node.left, module, env), self.expr(node.comparators[0], module, env)
        op = node.ops[0]
        if isinstance(op, (ast.Is, ast.IsNot)) and right is None:
            absent = self._is_none(left) if isinstance(left, ConfigRef) else (
                left is None if left is not UNKNOWN else UNKNOWN)
            return absent if absent is UNKNOWN or isinstance(op, ast.Is) else not absent
        if isinstance(op, (ast.Eq, ast.NotEq)) and all(type(v) in (str, int, bool) for v in (left, right)):
            return (left == right) is isinstance(op, ast.Eq)
        if isinstance(op, (ast.Eq, ast.NotEq)) and {type(left), type(right)} & {ConfigRef} \
                and {type(left), type(right)} - {ConfigRef} <= {str, int, bool}:
            return self.decide()  # a config's value against a constant: either way, by the config
        return UNKNOWN

    def truth(self, value: Any) -> Any:
        """A test's value: a config present or not as its class allows, a config's value either way."""
        if isinstance(value, ConfigRef):
            cls, _ = self.config_class(value.path)
            return not self._is_none(value) if cls is None or cls.name == "Config" else self.decide()
        return value

    def _attribute(self, node: ast.Attribute, module: str, env: dict[str, Any]) -> Any:
        dotted = ast.unparse(node)
        if dotted.startswith("MeshAxisName."):
            return node.attr.lower()
        if dotted.startswith("spmd.") and node.attr in TYPES:
            return TYPES[node.attr]
        value = self.expr(node.value, module, env)
        if isinstance(value, ConfigRef):
            if node.attr == "sharding_config":
                attached = self.world.attachments.get(value.path)
                return attached.value if attached is not None else UNKNOWN
            return value.child(node.attr)
        if isinstance(value, Config):
            return value.get(node.attr)
        return UNKNOWN

    def _call(self, node: ast.Call, module: str, env: dict[str, Any]) -> Any:
        callee = ast.unparse(node.func)
        if callee == "isinstance" and len(node.args) == 2 and not node.keywords:
            subject = self.expr(node.args[0], module, env)
            cls = self.program.class_named(module, ast.unparse(node.args[1]))
            return self._is_instance(subject.path, cls) if isinstance(subject, ConfigRef) and cls else UNKNOWN
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return self._not_followed(node, module, env)
        args = [self.expr(a, module, env) for a in node.args]
        keywords = {k.arg: self.expr(k.value, module, env) for k in node.keywords if k.arg is not None}
        built = construct(callee, args, keywords)
        if built is not None:
            return built
        if isinstance(node.func, ast.Attribute) and not args and not keywords:
            receiver = self.expr(node.func.value, module, env)
            if isinstance(receiver, dict) and node.func.attr in ("items", "keys", "values"):
                return tuple(getattr(receiver, node.func.attr)())
        function = self.program.function(module, node.func.id) if isinstance(node.func, ast.Name) else None
        if function is None or self._depth >= _DEPTH:
            return self._not_followed(node, module, env)
        return self.call(function, args, keywords)

    def call(self, function: Function, args: list[Any], keywords: dict[str, Any]) -> Any:
        """``function(*args, **keywords)`` run from its source (a parameter not given: its default)."""
        a = function.node.args
        positional = [*a.posonlyargs, *a.args]
        defaults = dict(zip([p.arg for p in positional][len(positional) - len(a.defaults):], a.defaults))
        defaults |= {p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None}
        env: dict[str, Any] = {}
        for index, parameter in enumerate([*positional, *a.kwonlyargs]):
            if index < len(positional) and index < len(args):
                env[parameter.arg] = args[index]
            elif parameter.arg in keywords:
                env[parameter.arg] = keywords[parameter.arg]
            elif parameter.arg in defaults:
                env[parameter.arg] = self.expr(defaults[parameter.arg], function.module, {})
            else:
                env[parameter.arg] = UNKNOWN
        for name, cls in self.program.annotations(function).items():
            if isinstance(env.get(name), ConfigRef):
                self._narrow(env[name].path, cls)
        self._depth += 1
        outer, self._parameters = self._parameters, set(env)
        try:
            return self._body(function.node.body, function.module, env)
        finally:
            self._depth -= 1
            self._parameters = outer

    def _not_followed(self, node: ast.Call, module: str, env: dict[str, Any]) -> Any:
        """A call the interpreter cannot follow: a config handed to it may get any layouts under it."""
        handed = {value.path for argument in [*node.args, *(k.value for k in node.keywords)]
                  for value in _values(self.expr(getattr(argument, "value", argument), module, env))
                  if isinstance(value, ConfigRef)}
        if isinstance(node.func, ast.Attribute):
            receiver = self.expr(node.func.value, module, env)
            handed |= {receiver.path} if isinstance(receiver, ConfigRef) else set()
        for path in handed:
            self.world.attachments = {p: a for p, a in self.world.attachments.items()
                                      if not (p == path or p.startswith(f"{path}.") or not path)}
        if handed:
            self._unevaluated(f"the call `{ast.unparse(node.func)}(...)`, handed the config it attaches under")
        return UNKNOWN

    # --- the configs' classes ---

    def config_class(self, path: str) -> tuple[TypeInfo | None, bool | None]:
        return config_class(self.world.classes, path)

    def _is_none(self, ref: ConfigRef) -> bool:
        _, optional = self.config_class(ref.path)
        return False if optional is False else not self.decide()

    def _is_instance(self, path: str, cls: TypeInfo) -> bool:
        current, _ = self.config_class(path)
        if current is not None and current.has_base(cls.fullname):
            return True
        if current is not None and not cls.has_base(current.fullname):
            return False
        if self.decide():
            self.world.classes[path] = cls
            return True
        return False

    def _narrow(self, path: str, cls: TypeInfo) -> None:
        current, _ = self.config_class(path)
        if current is None or cls.has_base(current.fullname):
            self.world.classes[path] = cls


def config_class(classes: dict[str, TypeInfo], path: str) -> tuple[TypeInfo | None, bool | None]:
    """The class of the config at ``path`` (narrowed in ``classes``, else as its parent's ``Config``
    annotates the field), and whether it may be None (None: not known)."""
    if path in classes:
        return classes[path], False
    if not path:
        return None, False
    parent, _, name = path.rpartition(".")
    if name == "*":
        return None, False
    return field_class(config_class(classes, parent)[0], name)


class _Returned(Exception):
    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value


def placed(statement: ast.stmt) -> ast.stmt | ast.expr:
    """Where a diagnostic about a statement goes: its first expression (the one a coverage place names)."""
    for name in ("value", "iter", "test"):
        found = getattr(statement, name, None)
        if isinstance(found, ast.expr):
            return found
    return statement


def _item(value: Any, index: Any) -> Any:
    if isinstance(value, tuple) and type(index) is int and -len(value) <= index < len(value):
        return value[index]
    return value[index] if isinstance(value, dict) and isinstance(index, str) and index in value else UNKNOWN


def _raises(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Raise)


def _values(value: Any) -> list[Any]:
    if isinstance(value, tuple):
        return [item for element in value for item in _values(element)]
    if isinstance(value, dict):
        return [item for element in value.values() for item in _values(element)]
    return [value]

