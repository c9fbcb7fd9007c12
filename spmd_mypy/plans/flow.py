"""The data flow of the planned modules' ``forward``s, evaluated abstractly on the plan's mesh axis.

A value is a local tensor of an SPMD type (unknown where nothing says), a
DTensor, a python number, or a tuple of values.  A call ``self.X(...)`` of a
planned sub-module takes and hands on what its style says
(:func:`~spmd_stubs.core.parallel_styles.style_types`); a sub-module that
is not planned runs its own ``forward`` (its source read with :mod:`ast`),
or, for one of torch's own modules, its op, whose parameters are then plain
tensors (``I`` on the axis, :mod:`.plain`).  Every other value follows the
ops by name through their records (:mod:`spmd_stubs.core.torch_ops`,
judged by :func:`spmd_stubs.core.evaluate`); anything else is unknown, and
an unknown value takes part in no judgement.  Each value remembers the plan
entries whose styles produced it, so a mismatch names them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Mapping

from mypy.checker import TypeChecker

from spmd_mypy.plans.plain import held_parameters
from spmd_mypy.plans.tree import Node, method, torch_names
from spmd_stubs.core import SCALAR, AxisType, Invariant, Kind, Shard, SpmdTypeError, evaluate
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


@dataclass
class _Frame:
    node: Node
    where: str
    env: dict[str, Value]
    returns: list[Value] = field(default_factory=list)
    torch_names: frozenset[str] = frozenset()
    """The names the module binds to torch's modules (``torch``, ``F``)."""


class Flow:
    """One evaluation of a plan's modules; :attr:`problems` collects what it finds."""

    def __init__(self, api: TypeChecker, axis: str, planned: Mapping[str, Planned], strict: bool = False,
                 plain: bool = True) -> None:
        """``strict``: shards of differently written dims never match (:func:`accepts`); ``plain``: a torch
        module without a style holds plain ``I`` parameters (False where another plan may give it one)."""
        self.api, self.axis, self.planned, self.strict, self.plain = api, axis, planned, strict, plain
        self.problems: list[Problem] = []
        self.reached: set[str] = set()
        self._depth = 0

    # --- modules ---

    def owner(self, node: Node, seeding: Mapping[str, Planned]) -> None:
        """Evaluate ``node``'s ``forward`` as an owner of planned modules, its inputs seeded with the types
        their first planned consumers in ``seeding`` take (dropped where it hands on a DTensor: then its
        caller passes DTensors too)."""
        found = method(self.api, node.info, "forward") if node.info is not None else None
        if found is None:
            return
        before = len(self.problems)
        result = self.forward(node, _seeds(found[1], node, seeding))
        if result.dtensor:
            del self.problems[before:]
            self.forward(node, {})

    def call(self, node: Node, args: list[Value], where: str, owner: Node) -> Value:
        """``self.X(*args)`` in ``owner.forward`` where ``self.X`` is ``node``."""
        planned = self.planned.get(node.path)
        if planned is None:
            return self._run(node, args, where, owner)
        types = planned.types
        if types is None:
            return UNKNOWN
        self._check_inputs(types, planned, args, where)
        if types.output is not None and types.returned is None:
            return _handed(types.output, planned.key)
        received = [_received(arg, handed, moved, planned.key) if handed is not None else arg
                    for arg, handed, moved in zip(args, [*types.received, *[None] * len(args)],
                                                  [*types.redistributed, *[False] * len(args)])]
        result = self._run(node, received, where, owner)
        if types.returned is not None and types.output is not None:
            if result.type is not None and not result.dtensor and not accepts(types.returned, result.type,
                                                                                self.strict):
                self._mismatch(planned, result, types.returned, f"{node.path}'s forward", "returns")
            return _handed(types.output, planned.key)
        return result

    def _run(self, node: Node, args: list[Value], where: str, owner: Node) -> Value:
        found = method(self.api, node.info, "forward") if node.info is not None else None
        if found is not None:
            return self.forward(node, dict(enumerate(args)))
        form = next((BY_MODULE[base.fullname] for base in node.info.mro if base.fullname in BY_MODULE), None) \
            if node.info is not None else None
        if form is None or not args:
            return UNKNOWN
        if form.op is None:
            return args[0]
        held = held_parameters(self.api, owner, node) if self.plain else {}
        plain = {name: Value(type=Invariant) for name, exists in held.items() if exists}
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
        held = " and ".join(parameters)
        reason = error.message.split(" Fix")[0].rstrip(".") if given.type.kind is not Kind.V else (
            f"{'their gradients sum' if len(parameters) > 1 else 'its gradient sums'} this rank's part of the "
            f"input only, and nothing reduces {'them' if len(parameters) > 1 else 'it'} across {self.axis}")
        self.problems.append(Problem(
            (node.path, *sorted(given.sources)),
            f'{where}: "{node.path}" has no style, so its {held} {"is" if len(parameters) == 1 else "are"} a plain '
            f"{Invariant.on(self.axis)} tensor, but it receives {given.type.on(self.axis)}{origin} (mesh axis "
            f"{self.axis}); {reason}", unplanned=True))

    def forward(self, node: Node, inputs: Mapping[int | str, Value]) -> Value:
        """Run ``node``'s ``forward`` on ``inputs`` (by position, or by name for a seed)."""
        found = method(self.api, node.info, "forward") if node.info is not None else None
        if found is None or self._depth >= _DEPTH:
            return UNKNOWN
        self.reached.add(node.path)
        cls, function = found
        names = [a.arg for a in [*function.args.posonlyargs, *function.args.args]][1:]
        env = {name: inputs.get(index, inputs.get(name, UNKNOWN)) for index, name in enumerate(names)}
        frame = _Frame(node, f"{cls.name}.forward", env, torch_names=torch_names(self.api, cls.module_name))
        self._depth += 1
        try:
            self._block(function.body, frame)
        finally:
            self._depth -= 1
        return _joined(frame.returns)

    def _check_inputs(self, types: StyleTypes, planned: Planned, args: list[Value], where: str) -> None:
        for needed, given in zip(types.inputs, args):
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
            branch = _Frame(frame.node, frame.where, dict(frame.env), frame.returns, frame.torch_names)
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
        for keyword in node.keywords:
            self.expr(keyword.value, frame)
        callee = node.func
        if not isinstance(callee, ast.Attribute):
            return UNKNOWN
        if isinstance(callee.value, ast.Name) and callee.value.id == "self":
            child = frame.node.children.get(callee.attr)
            return self.call(child, args, frame.where, frame.node) if child is not None else UNKNOWN
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


def _seeds(function: ast.FunctionDef, node: Node, planned: Mapping[str, Planned]) -> dict[int | str, Value]:
    """Each input of ``node.forward`` handed directly to a planned sub-module, or through an unplanned torch
    module that keeps its input's layout (``self.attention(self.attention_norm(x))``), as that sub-module
    takes it (the first such call in the source)."""
    names = {a.arg for a in [*function.args.posonlyargs, *function.args.args][1:]}
    seeds: dict[int | str, Value] = {}
    calls = sorted((c for c in ast.walk(function) if isinstance(c, ast.Call)), key=lambda c: (c.lineno, c.col_offset))
    for call in calls:
        child = _child(call, node)
        entry = planned.get(child.path) if child is not None else None
        if entry is None or entry.types is None:
            continue
        for arg, needed in zip(call.args, entry.types.inputs):
            inner = _child(arg, node) if isinstance(arg, ast.Call) and len(arg.args) == 1 else None
            if inner is not None and inner.path not in planned and _keeps_layout(inner):
                assert isinstance(arg, ast.Call)
                arg = arg.args[0]
            if isinstance(arg, ast.Name) and arg.id in names and arg.id not in seeds and needed is not None:
                seeds[arg.id] = Value(type=needed)
    return seeds


def _child(call: ast.expr, node: Node) -> Node | None:
    """The sub-module ``self.X`` a call ``self.X(...)`` calls."""
    callee = call.func if isinstance(call, ast.Call) else None
    return node.children.get(callee.attr) if isinstance(callee, ast.Attribute) and isinstance(
        callee.value, ast.Name) and callee.value.id == "self" else None


def _keeps_layout(node: Node) -> bool:
    """A torch module computing per element or per token (a norm, an activation, dropout): its output is laid
    out as its input."""
    form = next((BY_MODULE[base.fullname] for base in node.info.mro if base.fullname in BY_MODULE), None) \
        if node.info is not None else None
    return form is not None and form.op not in ("linear", "embedding", "softmax", "log_softmax", "softmin")


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
