"""The data flow of the planned modules' ``forward``s, evaluated abstractly on the plan's mesh axis.

A value is a local tensor of an SPMD type (unknown where nothing says), a
DTensor, a python number, or a tuple of values.  A call ``self.X(...)`` of a
planned sub-module takes and hands on what its style says
(:func:`~spmd_stubs.core.parallel_styles.style_types`), by position and by
keyword; a sub-module that is not planned runs its own ``forward`` (its
source read with :mod:`ast`; ``self.f(...)`` runs the class's method ``f``),
or, for one of torch's own modules, its op.  The parameters of a module no
style distributes are plain tensors, ``I`` on the axis (:mod:`.plain`), or
``R`` where the calling code all-reduces their gradients by hand
(:mod:`.by_hand`); where one of them breaks a rule, the module is reported
as left without a style.  Every other value follows the
ops by name through their records (:mod:`spmd_stubs.core.torch_ops`,
judged by :func:`spmd_stubs.core.evaluate`); anything else is unknown, and
an unknown value takes part in no judgement.  Each value remembers the plan
entries whose styles produced it, so a mismatch names them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Callable, Mapping

from mypy.checker import TypeChecker

from spmd_mypy.plans.plain import held_parameters, user_parameters
from spmd_mypy.plans.seeds import seeded_inputs
from spmd_mypy.plans.tree import Node, method, torch_names
from spmd_stubs.core import SCALAR, AxisType, Invariant, Kind, Replicate, Shard, SpmdTypeError, evaluate
from spmd_stubs.core.parallel_styles import Handed, StyleTypes, accepts
from spmd_stubs.core.rules import Apply, Arg, Expr
from spmd_stubs.core.torch_ops import TENSOR_ATTRIBUTES, Variadic, lookup
from spmd_stubs.core.torch_ops.modules import BY_MODULE, INPUT
from spmd_stubs.core.torch_ops.shapes import POINTWISE

_DEPTH = 8
"""How deep ``forward`` calls are followed."""

_OPERATORS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.MatMult: "matmul", ast.Div: "truediv",
              ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow"}


@dataclass(frozen=True)
class Value:
    """An abstract value; ``sources`` are the plan keys whose styles made it what it is."""

    type: AxisType | None = None
    dtensor: bool = False
    scalar: bool = False
    items: tuple[Value, ...] | None = None
    sources: frozenset[str] = frozenset()
    parameter: str | None = None
    """The name of the plain parameter it is (``self.weight`` of a module without a style)."""


UNKNOWN = Value()


@dataclass(frozen=True)
class Planned:
    """A sub-module's plan entry: its key, the style as written, and the style's types (None: not a
    modelled style, so the module hands on unknown values)."""

    key: str
    style: str
    types: StyleTypes | None


@dataclass(frozen=True)
class Problem:
    """A mismatch: the plan keys involved (the one it is about first) and what is wrong, in words;
    ``unplanned``: the first is a sub-module the plan gives no style, whose fix adds an entry for it."""

    keys: tuple[str, ...]
    message: str
    unplanned: bool = False
    advice: str | None = None
    """The fix where it is not a change of the plan."""


@dataclass
class _Frame:
    node: Node
    where: str
    env: dict[str, Value]
    returns: list[Value] = field(default_factory=list)
    torch_names: frozenset[str] = frozenset()
    """The names the module binds to torch's modules (``torch``, ``F``)."""
    parameters: Mapping[str, Value] = field(default_factory=dict)
    """The module's plain parameters, by attribute name."""


class Flow:
    """One evaluation of a plan's modules; :attr:`problems` collects what it finds."""

    def __init__(self, api: TypeChecker, axis: str, planned: Mapping[str, Planned], strict: bool = False,
                 plain: Callable[[str], bool] = lambda path: True, reduced: Mapping[str, int] | None = None) -> None:
        """``strict``: shards of differently written dims never match (:func:`accepts`); ``plain``: whether a
        sub-module (by path) without a style holds plain parameters (not where another plan may give it one);
        ``reduced``: the sub-modules whose parameters' gradients are all-reduced by hand, with the line."""
        self.api, self.axis, self.planned, self.strict, self.plain = api, axis, planned, strict, plain
        self.reduced = reduced or {}
        self.problems: list[Problem] = []
        self.reached: set[str] = set()
        self._depth = 0
        self._keywords: Mapping[str, Value] = {}
        """The keyword inputs of the ``self.X(...)`` call :meth:`call` evaluates (its signature is the
        layouts' evaluator's too)."""
        self._clashes: list[list[SpmdTypeError]] = []
        """Per module run with plain parameters: the rules its parameters break."""

    # --- modules ---

    def owner(self, node: Node, seeding: Mapping[str, Planned]) -> None:
        """Evaluate ``node``'s ``forward`` as an owner of planned modules, its inputs seeded with the types
        their first planned consumers in ``seeding`` take (dropped where it hands on a DTensor: then its
        caller passes DTensors too)."""
        found = method(self.api, node.info, "forward") if node.info is not None else None
        if found is None:
            return
        before = len(self.problems)
        styles = {path: planned.types for path, planned in seeding.items()}
        seeds: dict[int | str, Value] = {
            name: Value(type=type_) for name, type_ in seeded_inputs(self.api, found[1], node, styles).items()}
        result = self.forward(node, seeds)
        if result.dtensor:
            del self.problems[before:]
            self.forward(node, {})

    def call(self, node: Node, args: list[Value], where: str, owner: Node) -> Value:
        """``self.X(*args)`` in ``owner.forward`` where ``self.X`` is ``node``."""
        keywords, self._keywords = self._keywords, {}
        planned = self.planned.get(node.path)
        if planned is None:
            return self._run(node, args, where, owner, keywords)
        types = planned.types
        if types is None:
            return UNKNOWN
        self._check_inputs(types, planned, args, where, keywords)
        if types.output is not None and types.returned is None:
            return _handed(types.output, planned.key)
        received = [_received(arg, handed, moved, planned.key) if handed is not None else arg
                    for arg, handed, moved in zip(args, [*types.received, *[None] * len(args)],
                                                  [*types.redistributed, *[False] * len(args)])]
        prepared = types.keyword_inputs
        received_keywords = {name: _received(value, prepared[name].received, prepared[name].redistributed,
                                             planned.key) if name in prepared else value
                             for name, value in keywords.items()}
        result = self._run(node, received, where, owner, received_keywords)
        if types.returned is not None and types.output is not None:
            if result.type is not None and not result.dtensor and not accepts(types.returned, result.type,
                                                                                self.strict):
                self._mismatch(planned, result, types.returned, f"{node.path}'s forward", "returns")
            return _handed(types.output, planned.key)
        return result

    def _run(self, node: Node, args: list[Value], where: str, owner: Node,
             keywords: Mapping[str, Value] | None = None) -> Value:
        """A sub-module whose style leaves its parameters alone (none, or ``PrepareModule*``) run on ``args``."""
        found = method(self.api, node.info, "forward") if node.info is not None else None
        plain_type = Replicate if node.path in self.reduced else Invariant
        if found is not None:
            names = user_parameters(self.api, node.info) if node.info is not None and self.plain(node.path) else None
            parameters = {name: Value(type=plain_type, parameter=name) for name in names or ()}
            self._clashes.append([])
            try:
                result = self.forward(node, _inputs(args, keywords or {}), parameters=parameters)
            finally:
                clashes = self._clashes.pop()
            given = next((arg for arg in [*args, *(keywords or {}).values()] if arg.type is not None), None)
            if clashes and given is not None:
                self._unplanned(node, sorted(parameters), given, clashes[0], where)
            return result
        form = next((BY_MODULE[base.fullname] for base in node.info.mro if base.fullname in BY_MODULE), None) \
            if node.info is not None else None
        if form is None or not args:
            return UNKNOWN
        if form.op is None:
            return args[0]
        held = held_parameters(self.api, owner, node) if self.plain(node.path) else {}
        plain = {name: Value(type=plain_type) for name, exists in held.items() if exists}
        operands = [args[0] if operand == INPUT else plain.get(operand or "", UNKNOWN) for operand in form.operands]
        given, record = args[0], lookup(form.op)
        if plain and record is not None and not isinstance(record.rule, Variadic) and given.type is not None \
                and not given.dtensor:
            try:
                evaluate(record.rule, [v.type for v in operands], form.op, self.axis, record.effect,
                         record.bias is not None)
            except SpmdTypeError as error:
                self._unplanned(node, sorted(plain), given, error, where)
                operands = [args[0] if operand == INPUT else UNKNOWN for operand in form.operands]
        return self.op(form.op, operands, where)

    def _unplanned(self, node: Node, parameters: list[str], given: Value, error: SpmdTypeError, where: str) -> None:
        """A module without a style, whose plain parameters meet a local input they cannot be used beside."""
        assert given.type is not None
        origin = f" from {_listed(given.sources)}" if given.sources else ""
        held, one = " and ".join(parameters), len(parameters) == 1
        line = self.reduced.get(node.path)
        if line is not None:  # R: a pending gradient the all-reduce completes, right for a shard only
            self.problems.append(Problem(
                (node.path, *sorted(given.sources)),
                f'{where}: the {held} of "{node.path}" {"has its gradient" if one else "have their gradients"} '
                f"all-reduced over {self.axis} by hand (line {line}), which makes {'it' if one else 'them'} "
                f'{Replicate.on(self.axis)}, but "{node.path}" receives {given.type.on(self.axis)}{origin} (mesh axis '
                f"{self.axis}); each rank already holds the whole gradient, which the all-reduce counts once per "
                f"rank", unplanned=True,
                advice=f'Fix: drop the all-reduce of the gradients of "{node.path}" (line {line}).'))
            return
        reason = error.message.split(" Fix")[0].rstrip(".") if given.type.kind is not Kind.V else (
            f"{'its gradient sums' if one else 'their gradients sum'} this rank's part of the "
            f"input only, and nothing reduces {'it' if one else 'them'} across {self.axis}")
        self.problems.append(Problem(
            (node.path, *sorted(given.sources)),
            f'{where}: "{node.path}" has no style, so its {held} {"is" if one else "are"} a plain '
            f"{Invariant.on(self.axis)} tensor, but it receives {given.type.on(self.axis)}{origin} (mesh axis "
            f"{self.axis}); {reason}", unplanned=True))

    def forward(self, node: Node, inputs: Mapping[int | str, Value], name: str = "forward",
                parameters: Mapping[str, Value] | None = None) -> Value:
        """Run ``node``'s ``forward`` (or its method ``name``) on ``inputs`` (by position, or by name for a seed
        or a keyword), its ``self.X`` the module's plain ``parameters``."""
        found = method(self.api, node.info, name) if node.info is not None else None
        if found is None or self._depth >= _DEPTH:
            return UNKNOWN
        self.reached.add(node.path)
        cls, function = found
        names = [a.arg for a in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]][1:]
        env = {name: inputs.get(index, inputs.get(name, UNKNOWN)) for index, name in enumerate(names)}
        frame = _Frame(node, f"{cls.name}.{name}", env, torch_names=torch_names(self.api, cls.module_name),
                       parameters=parameters or {})
        self._depth += 1
        try:
            self._block(function.body, frame)
        finally:
            self._depth -= 1
        return _joined(frame.returns)

    def _check_inputs(self, types: StyleTypes, planned: Planned, args: list[Value], where: str,
                      keywords: Mapping[str, Value]) -> None:
        count = types.positional_count
        if count is not None and len(args) != count:
            self.problems.append(Problem((planned.key,), (
                f'{where} calls "{planned.key}": {planned.style} with {len(args)} positional inputs where its '
                f"input_layouts name {count} (mesh axis {self.axis}); torch raises: module inputs and input_layouts "
                "should have same length"), advice="Fix: give input_layouts one layout per positional input (None for "
                "one left alone), and a keyword input's layout in input_kwarg_layouts."))
        named = [(types.keyword_inputs[name].needed, value) for name, value in keywords.items()
                 if name in types.keyword_inputs]
        for needed, given in [*zip(types.inputs, args), *named]:
            if needed is not None and given.type is not None and not given.dtensor and not accepts(
                    needed, given.type, self.strict):
                self._mismatch(planned, given, needed, where, "feeds")

    def _mismatch(self, planned: Planned, given: Value, needed: AxisType, where: str, verb: str) -> None:
        assert given.type is not None
        shown, axis = given.type.on(self.axis), needed.on(self.axis)
        origin = f" from {_listed(given.sources)}" if given.sources else ""
        why = _why(planned.style, given, needed, self.planned)
        self.problems.append(Problem(
            (planned.key, *sorted(given.sources)),
            f'{where} {verb} {shown}{origin} to "{planned.key}": {planned.style} where {axis} is needed '
            f"(mesh axis {self.axis}); {why}"))

    # --- statements ---

    def _block(self, statements: list[ast.stmt], frame: _Frame) -> None:
        for statement in statements:
            self._statement(statement, frame)

    def _statement(self, statement: ast.stmt, frame: _Frame) -> None:
        if isinstance(statement, ast.Assign):
            value = self.expr(statement.value, frame)
            for target in statement.targets:
                _bind(target, value, frame.env)
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            _bind(statement.target, self.expr(statement.value, frame), frame.env)
        elif isinstance(statement, ast.AugAssign):
            word = _OPERATORS.get(type(statement.op))
            operands = [self.expr(statement.target, frame), self.expr(statement.value, frame)]
            _bind(statement.target, self.op(f"__{word}__", operands, frame.where) if word else UNKNOWN, frame.env)
        elif isinstance(statement, ast.Return):
            frame.returns.append(self.expr(statement.value, frame) if statement.value is not None else UNKNOWN)
        elif isinstance(statement, ast.Expr):
            self.expr(statement.value, frame)
        elif isinstance(statement, ast.If):
            self.expr(statement.test, frame)
            frame.env = self._branches([statement.body, statement.orelse], frame)
        elif isinstance(statement, (ast.For, ast.While, ast.With, ast.Try)):
            # a body that may run any number of times (or be left early): what it changes is unknown after it
            if isinstance(statement, ast.For):
                self.expr(statement.iter, frame)
                _bind(statement.target, UNKNOWN, frame.env)
            bodies = [statement.body, *(h.body for h in getattr(statement, "handlers", ())),
                      getattr(statement, "orelse", []), getattr(statement, "finalbody", [])]
            frame.env = self._branches([[], *bodies], frame)

    def _branches(self, bodies: list[list[ast.stmt]], frame: _Frame) -> dict[str, Value]:
        """Each body run from the same values; a name they leave different is unknown after them."""
        results = []
        for body in bodies:
            branch = _Frame(frame.node, frame.where, dict(frame.env), frame.returns, frame.torch_names,
                            frame.parameters)
            self._block(body, branch)
            results.append(branch.env)
        names = set().union(*results)
        return {name: results[0].get(name, UNKNOWN) if all(r.get(name) == results[0].get(name) for r in results)
                else UNKNOWN for name in names}

    # --- expressions ---

    def expr(self, node: ast.expr, frame: _Frame) -> Value:
        if isinstance(node, ast.Name):
            return frame.env.get(node.id, UNKNOWN)
        if isinstance(node, ast.Constant):
            return Value(scalar=True) if isinstance(node.value, (int, float)) and not isinstance(node.value, bool) \
                else UNKNOWN
        if isinstance(node, (ast.Tuple, ast.List)):
            return Value(items=tuple(self.expr(item, frame) for item in node.elts))
        if isinstance(node, ast.BinOp):
            operands = [self.expr(node.left, frame), self.expr(node.right, frame)]
            word = _OPERATORS.get(type(node.op))
            return self.op(f"__{word}__", operands, frame.where) if word else UNKNOWN
        if isinstance(node, ast.UnaryOp):
            operand = self.expr(node.operand, frame)
            return self.op("__neg__", [operand], frame.where) if isinstance(node.op, ast.USub) else UNKNOWN
        if isinstance(node, ast.Call):
            return self._call(node, frame)
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr in frame.parameters:
                return frame.parameters[node.attr]
            value = self.expr(node.value, frame)
            if node.attr == "shape":
                self._local_shape(value, frame)
            record = TENSOR_ATTRIBUTES.get(node.attr)
            return self.op(node.attr, [value], frame.where) if record is not None and _tensor(value) else UNKNOWN
        if isinstance(node, ast.Subscript):
            value = self.expr(node.value, frame)
            index = self.expr(node.slice, frame)
            if value.items is not None and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
                position = node.slice.value
                return value.items[position] if -len(value.items) <= position < len(value.items) else UNKNOWN
            return self.op("__getitem__", [value, index], frame.where) if _tensor(value) else UNKNOWN
        if isinstance(node, ast.IfExp):
            self.expr(node.test, frame)
            return _joined([self.expr(node.body, frame), self.expr(node.orelse, frame)])
        return UNKNOWN

    def _call(self, node: ast.Call, frame: _Frame) -> Value:
        if any(isinstance(a, ast.Starred) for a in node.args):
            return UNKNOWN
        args = [self.expr(a, frame) for a in node.args]
        keywords = {k.arg: self.expr(k.value, frame) for k in node.keywords if k.arg is not None}
        callee = node.func
        if not isinstance(callee, ast.Attribute):
            return UNKNOWN
        if isinstance(callee.value, ast.Name) and callee.value.id == "self":
            child = frame.node.children.get(callee.attr)
            if child is None:  # a method of the module's class, on its own parameters
                return self.forward(frame.node, _inputs(args, keywords), callee.attr, frame.parameters)
            self._keywords = keywords
            return self.call(child, args, frame.where, frame.node)
        if _namespace(callee.value, frame):
            return self.op(callee.attr, args, frame.where)  # torch.cat(...), F.silu(...)
        receiver = self.expr(callee.value, frame)
        if callee.attr == "size":
            self._local_shape(receiver, frame)
        return self.op(callee.attr, [receiver, *args], frame.where) if _tensor(receiver) else UNKNOWN

    def _local_shape(self, value: Value, frame: _Frame) -> None:
        """A shard's local shape read where whole sizes are expected (``batch, seq, _ = x.shape``): the
        sizes are this rank's piece's.  Judged only when checking a fix (``strict``): code written for a
        shard's shape is right as it is."""
        if self.strict and value.type is not None and value.type.kind is Kind.V and not value.dtensor:
            self.problems.append(Problem(tuple(sorted(value.sources)), f"{frame.where}: the shape of a local "
                                         f"{value.type.on(self.axis)} is read (mesh axis {self.axis})"))

    def op(self, name: str, operands: list[Value], where: str) -> Value:
        """The op ``name`` (a method, function or operator spelling) applied to ``operands``."""
        record = lookup(name) or TENSOR_ATTRIBUTES.get(name)
        if record is not None and isinstance(record.rule, Variadic):
            operands = [item for v in operands[record.rule.start:] for item in (v.items or (v,))]
        local = [v for v in operands if v.type is not None and not v.dtensor]
        distributed = [v for v in operands if v.dtensor]
        sources = frozenset().union(*(v.sources for v in local + distributed))
        if distributed and local:
            self._mixed(_word(name), distributed, local, where)
            return UNKNOWN
        if distributed:
            return Value(dtensor=True, sources=sources)
        if record is None or not local or not record.result_has_gradient:
            return UNKNOWN
        dims = sorted({v.type.shard for v in local if v.type is not None and v.type.shard is not None})
        if self.strict and len(dims) > 1:  # pieces of different dims, whatever the tensors' rank
            self.problems.append(Problem(tuple(sorted(sources)), f"{where}: {_word(name)} meets shards of dims "
                                         f"{dims} on mesh axis {self.axis}"))
            return UNKNOWN
        rule: Expr = Apply(record.rule.linearity, *(Arg(i) for i in range(len(operands)))) \
            if isinstance(record.rule, Variadic) else record.rule
        types = [SCALAR if v.scalar else v.type for v in operands]
        try:
            result = evaluate(rule, types, _word(name), self.axis, record.effect, record.bias is not None)
        except SpmdTypeError as error:
            if self._clashes and any(v.parameter is not None for v in local):
                self._clashes[-1].append(error)  # the module's missing style, reported by _run
            else:
                self._broken(error, local, where)
            return UNKNOWN
        if result is None:
            return UNKNOWN
        unsharded = any(v.type is not None and v.type.kind is Kind.V and v.type.shard is None for v in local)
        if record.shape is POINTWISE and result.kind is Kind.V and len(dims) == 1 and not unsharded:
            result = Shard(dims[0])  # an elementwise op keeps its operands' one shard dim (global layout)
        return Value(type=result, sources=sources)

    def _mixed(self, op: str, distributed: list[Value], local: list[Value], where: str) -> None:
        keys = sorted(frozenset().union(*(v.sources for v in distributed)))
        others = " and ".join(_described(v, self.axis) for v in local)
        self.problems.append(Problem(
            (*keys, *sorted(frozenset().union(*(v.sources for v in local)) - set(keys))),
            f"{where}: {op} meets a DTensor from {_listed(keys)} with a local tensor {others} (mesh axis "
            f"{self.axis}); torch refuses an op on a DTensor and a plain tensor"))

    def _broken(self, error: SpmdTypeError, local: list[Value], where: str) -> None:
        keys = sorted(frozenset().union(*(v.sources for v in local)))
        if not keys:
            return  # no plan entry decides these types: the typed code's own check reports it
        described = " and ".join(_described(v, self.axis) for v in local)
        reason = error.message.split(" Fix")[0].rstrip(".")
        self.problems.append(Problem(tuple(keys), f"{where}: {described} break a rule: {reason}"))


def _inputs(args: list[Value], keywords: Mapping[str, Value]) -> dict[int | str, Value]:
    """A call's inputs by position and by keyword."""
    inputs: dict[int | str, Value] = dict(enumerate(args))
    inputs.update(keywords)
    return inputs


def _received(arg: Value, handed: Handed, redistributed: bool, key: str) -> Value:
    """What a module's ``forward`` gets from ``PrepareModuleInput`` for ``arg``."""
    if arg.dtensor and not handed.dtensor and not redistributed:
        return Value(sources=frozenset({key}))  # the local tensor of the DTensor's own placement
    return _handed(handed, key)


def _handed(handed: Handed, key: str) -> Value:
    return Value(type=None if handed.dtensor else handed.type, dtensor=handed.dtensor, sources=frozenset({key}))


def _bind(target: ast.expr, value: Value, env: dict[str, Value]) -> None:
    if isinstance(target, ast.Name):
        env[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)):
        items = value.items if value.items is not None and len(value.items) == len(target.elts) else None
        for position, element in enumerate(target.elts):
            _bind(element, items[position] if items is not None else UNKNOWN, env)


def _joined(values: list[Value]) -> Value:
    return values[0] if values and all(v == values[0] for v in values) else UNKNOWN


def _tensor(value: Value) -> bool:
    return value.type is not None or value.dtensor


def _namespace(node: ast.expr, frame: _Frame) -> bool:
    """``torch``, ``F``, ``torch.nn.functional``: a dotted name from a torch import the function does not
    rebind."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in frame.torch_names and node.id not in frame.env


def _word(name: str) -> str:
    return name.strip("_") if name.startswith("__") else name


def _listed(keys: frozenset[str] | list[str]) -> str:
    return ", ".join(f'"{key}"' for key in sorted(keys))


def _described(value: Value, axis: str) -> str:
    assert value.type is not None
    return f"{value.type.on(axis)} from {_listed(value.sources)}" if value.sources else value.type.on(axis)


def _why(style: str, given: Value, needed: AxisType, planned: Mapping[str, Planned]) -> str:
    colwise_source = any(p.key in given.sources and p.style.startswith("ColwiseParallel") for p in planned.values())
    if needed.kind is Kind.I and given.type is not None and given.type.kind is Kind.V and colwise_source:
        return "a colwise output is this rank's columns: colwise must feed a rowwise or a gather"
    if style.startswith("RowwiseParallel") and given.type is not None and given.type.kind in (Kind.I, Kind.R):
        return "rowwise given a replicated input reads the whole tensor as this rank's slice of it"
    return "from_local reads the local tensor as that layout, which it is not"
