"""A setter's attached layouts run through the owners' ``forward``s (the plans' evaluator, :class:`Flow`).

Each module with a layout attached, or with one attached to a child, has its
``forward`` evaluated (once, where no enclosing ``forward`` already called
it): its inputs are what its ``in_dst_shardings`` declare (else its
``in_src_shardings``; the framework redistributes to them).  A call of a
sub-module with a layout attached takes each input as its
``in_dst_shardings`` declare it (else as given), computes, must compute its
``out_src_shardings``, and hands on its ``out_dst_shardings`` (else its
``out_src_shardings``, else what it computed).  It computes its op where
it is one of torch's modules: ``nn.Linear``'s ``x @ W.T`` with the
parameters of its ``state_shardings``, judged by dims with global SPMD's
``linear`` rule (:mod:`spmd_stubs.core.sharding`): ``x`` sharded on its
features (``S(-1)``) needs ``W``'s input features sharded (``S(1)``) and
gives ``P``, which the layout must declare; a whole ``x`` with ``W``'s
output features sharded (``S(0)``) gives ``S(-1)``; another torch module
hands on what it declares.  Any other module runs its own ``forward``.  A
sub-module without a layout runs its ``forward`` where layouts are attached
below it, else hands on an unknown value.

A layout with ``local_map`` makes its module's ``forward`` a local region
(:mod:`spmd_stubs.core.local_regions`).  Under DTensor's ``local_map`` an
input's type on the axis is its ``in_dst_shardings`` placement read with
its ``in_grad_placements`` entry (left out: the forward placement), and
the body's result must have the type ``from_local`` gives the
``out_src_shardings`` placement; under spmd_types' ``local_map`` both are
the declared types.  A region whose body's result the evaluator does not
know is recorded in :attr:`LayoutFlow.unfollowed`.

Inside a region a module's parameters are DTensors of its
``state_shardings`` placements (``local_map`` converts its inputs only):
``if isinstance(self.w, DTensor):`` runs its body, ``self.w.to_local()``
is the local tensor read with its placement as its gradient's.  A helper
the module builds from its config (``self.token_dispatcher =
config.token_dispatcher.build()``) runs the methods of the class the
config field's annotation names.  A region whose result leaves as
``Partial()`` gives every rank the whole gradient of it, so each rank's
gradient of an input it reads ``Replicate()`` is that rank's share of the
input's: under DTensor's ``local_map`` an input read so with its gradient
left out (``I``) is a problem where an op carries its gradient and none
selects with it (an index, such as an embedding's token ids).
"""

from __future__ import annotations

import ast
from typing import Any, Collection, Mapping

from mypy.checker import TypeChecker
from mypy.lookup import lookup_fully_qualified
from mypy.nodes import TypeInfo

from spmd_mypy.layouts.program import built, field_class
from spmd_mypy.layouts.values import Config, LocalMap, on
from spmd_mypy.plans.flow import UNKNOWN, Flow, Problem, Value, _Frame, _inputs
from spmd_mypy.plans.tree import Node, method
from spmd_stubs.core import AxisType, Invariant, Kind, Shard, SpmdTypeError, sharding
from spmd_stubs.core.local_regions import region_input_type, region_output_type
from spmd_stubs.core.parallel_styles import REPLICATE, Placement, accepts, shard
from spmd_stubs.core.rules import Apply, Arg, Linearity
from spmd_stubs.core.torch_ops import TENSOR_ATTRIBUTES, Variadic, lookup
from spmd_stubs.core.torch_ops.modules import BY_MODULE
from spmd_stubs.core.torch_ops.record import Rule

DTENSOR, SPMD_TYPES = "DTensor's local_map", "spmd_types' local_map"


class LayoutFlow(Flow):
    """One evaluation of the modules ``configs`` (by config path) attach layouts to; ``names`` shows a path
    as the setter writes it; ``backend`` is the ``local_map`` regions run under."""

    def __init__(self, api: TypeChecker, axis: str, configs: Mapping[str, Config], names: Mapping[str, str],
                 strict: bool, backend: str = DTENSOR, silent: Collection[str] = ()) -> None:
        """``silent``: the config paths whose layout is attached as None (not followed)."""
        super().__init__(api, axis, {}, strict=strict)
        self.configs, self.names, self.backend, self.silent = configs, names, backend, silent
        self.called: set[str] = set()
        """The config paths of the sub-modules some evaluated ``forward`` calls."""
        self.unfollowed: dict[str, str] = {}
        """Config path -> why the region's body is not judged."""
        self._regions = 0
        """How many ``local_map`` regions the ``forward`` being evaluated runs inside."""
        self._whole: dict[int, Value] = {}
        """The inputs a region whose result is a pending sum reads whole (by id, held alive)."""
        self._derived: dict[int, tuple[Value, set[int]]] = {}
        """Each value (by id, held alive) an op computed carrying the gradient of inputs of :attr:`_whole`."""
        self._carried: set[int] = set()
        """The inputs of :attr:`_whole` some op carried the gradient of."""
        self._indices: set[int] = set()
        """The inputs of :attr:`_whole` that an op selects with, themselves or through what derives from them."""

    def run(self, root: Node) -> None:
        for node in root.walk():
            if node.path not in self.reached and node.path not in self.silent and self._owns_layouts(node) \
                    and _forward(self.api, node):
                config = self.configs.get(node.path)
                self.called.add(node.path)
                self._computed(node, config, self._seeds(node, config)) if config is not None \
                    else self.forward(node, {})

    def _owns_layouts(self, node: Node) -> bool:
        return node.path in self.configs or any(child.path in self.configs for child in node.children.values())

    def _seeds(self, node: Node, config: Config) -> list[Value]:
        """The inputs of ``node.forward`` as its layout declares them."""
        declared = config.get("in_dst_shardings") or config.get("in_src_shardings")
        names = _parameters(self.api, node)
        key = self.names[node.path]
        return [self._input(config, declared.get(name) if isinstance(declared, dict) else None, index, key)
                or UNKNOWN for index, name in enumerate(names)]

    def _input(self, config: Config, layout: Any, index: int, key: str) -> Value | None:
        """A declared input's value: its type on the axis, read as a region's input under ``local_map``."""
        declared = on(layout, self.axis)
        region = config.get("local_map")
        if declared is None:
            return None
        if isinstance(region, LocalMap) and self.backend == DTENSOR:
            gradients = region.gradients or ()
            gradient = on(gradients[index], self.axis) if index < len(gradients) else None
            read = region_input_type(_placement(declared), _placement(gradient) if gradient is not None else None)
            return Value(type=read, sources=frozenset({key})) if read is not None else None
        return Value(type=declared, sources=frozenset({key}))

    def call(self, node: Node, args: list[Value], where: str, owner: Node | None = None) -> Value:
        """``self.X(*args)`` in ``owner.forward`` where ``self.X`` is ``node``."""
        config = self.configs.get(node.path)
        self.called.add(node.path)
        if node.path in self.silent:
            return UNKNOWN
        if config is None:
            below = any(path.startswith(f"{node.path}.") for path in self.configs)
            return self.forward(node, dict(enumerate(args))) if below and _forward(self.api, node) else UNKNOWN
        declared = config.get("in_dst_shardings")
        names = _parameters(self.api, node)
        key = self.names[node.path]
        if isinstance(declared, dict) and len(declared) == 1 and not set(declared) & set(names):
            names = list(declared)  # a torch module's input, named by the layout
        inputs = [self._input(config, declared.get(name), index, key) or arg if isinstance(declared, dict) else arg
                  for index, (name, arg) in enumerate(zip([*names, *[""] * len(args)], args))]
        return self._computed(node, config, inputs, where)

    def _computed(self, node: Node, config: Config, inputs: list[Value], where: str = "") -> Value:
        """What a module with a layout computes from ``inputs``, checked against its ``out_src_shardings``;
        what it hands on."""
        key = self.names[node.path]
        state = config.get("state_shardings") or {}
        weight = on(state.get("weight"), self.axis) if isinstance(state, dict) else None
        form = next((BY_MODULE[b.fullname] for b in node.info.mro if b.fullname in BY_MODULE), None) \
            if node.info is not None else None
        produced = on(config.get("out_src_shardings"), self.axis)
        given = inputs[0] if inputs else UNKNOWN
        linear = not _forward(self.api, node) and form is not None and form.op == "linear"
        region = isinstance(config.get("local_map"), LocalMap)
        if _forward(self.api, node):
            whole = self._whole_inputs(node, config, inputs) if region else {}
            self._whole.update({id(value): value for value in whole.values()})
            self._regions += region
            try:
                computed = self.forward(node, dict(enumerate(inputs)),
                                        parameters=self._state(config, key) if self._regions else None)
            finally:
                self._regions -= region
            self._under_reduced(key, produced, [name for name, value in whole.items()
                                                if id(value) in self._carried and id(value) not in self._indices])
        elif linear and given.type is not None and weight is not None:
            computed = self._linear(given, weight, key, where or f"{_class_name(node)}.forward", produced)
        else:
            computed = UNKNOWN
        expected = region_output_type(_placement(produced)) if region and produced is not None \
            and self.backend == DTENSOR else produced
        if region and computed.type is None:
            self.unfollowed.setdefault(node.path, f"{_class_name(node)}.forward's result is not known to the checker"
                                       if _forward(self.api, node) else "its module's class is not known")
        # dims written from the front and the back agree at the layout's own rank (a fix does not change it)
        if computed.type is not None and expected is not None and not accepts(expected, computed.type):
            assert produced is not None
            origin = f" from {given.type.on(self.axis)}{_from(given, key)} and its weight " \
                f"{weight.on(self.axis) if weight else '?'}" if linear and given.type is not None else _from(computed, key)
            read = f" ({self.backend}: {expected.on(self.axis)})" if region else ""
            self.problems.append(Problem(
                (key, *sorted(computed.sources - {key})),
                f'"{key}" computes {computed.type.on(self.axis)}{origin} where its out_src_shardings declare '
                f"{produced.on(self.axis)}{read} (mesh axis {self.axis})"))
        handed = on(config.get("out_dst_shardings"), self.axis) or produced
        return Value(type=handed, sources=frozenset({key})) if handed is not None else computed

    def op(self, name: str, operands: list[Value], where: str) -> Value:
        """An op, following what it makes of the inputs read whole (:meth:`_whole_inputs`): a result that
        carries their gradient derives from them; an operand it selects with (an index) is no input with a
        gradient."""
        record = lookup(name) or TENSOR_ATTRIBUTES.get(name)
        carried_from: set[int] = set()
        if record is not None:
            carried, selectors = _carried(record.rule, len(operands)), _selectors(record.rule)
            for index, operand in enumerate(operands):
                for value in operand.items or (operand,):
                    origins = self._origins(value)
                    if index in selectors:
                        self._indices |= origins
                    elif index in carried and record.result_has_gradient:
                        carried_from |= origins
        result = super().op(name, operands, where)
        if carried_from and result.type is not None:
            self._derived[id(result)] = (result, carried_from)
            self._carried |= carried_from
        return result

    def _origins(self, value: Value) -> set[int]:
        if id(value) in self._whole:
            return {id(value)}
        return set(self._derived[id(value)][1]) if id(value) in self._derived else set()

    def _whole_inputs(self, node: Node, config: Config, inputs: list[Value]) -> dict[str, Value]:
        """Under DTensor's ``local_map``, where the region's result leaves as ``Partial()`` on the axis: the
        inputs it reads ``Replicate()`` with the gradient left out, so DTensor takes each rank's gradient of
        them as the whole one (``I``), by name."""
        region = config.get("local_map")
        produced = on(config.get("out_src_shardings"), self.axis)
        if self.backend != DTENSOR or not isinstance(region, LocalMap) or produced is None \
                or produced.kind is not Kind.P:
            return {}
        gradients = region.gradients or ()
        names = _parameters(self.api, node)
        return {name: value for index, (name, value) in enumerate(zip(names, inputs))
                if value.type is not None and value.type.kind is Kind.I
                and (index >= len(gradients) or gradients[index] is None)}

    def _under_reduced(self, key: str, produced: AxisType | None, names: list[str]) -> None:
        """The theorem behind ``in_grad_placements``: a region whose result is a pending sum (``P``) gives
        every rank the whole gradient of it, so each rank's gradient of an input it reads whole is that rank's
        share of the input's gradient, which only ``Partial()`` sums."""
        if not names or produced is None:
            return
        listed = ", ".join(names)
        self.problems.append(Problem((key,), (
            f'"{key}" reads {listed} as {Invariant.on(self.axis)} ({self.backend}: Replicate() with its gradient '
            f"left out) in a region whose result is {produced.on(self.axis)} (mesh axis {self.axis}); each "
            f"rank's gradient of {'it' if len(names) == 1 else 'them'} is its share of the sum, which "
            "Replicate() keeps unreduced")))

    def _state(self, config: Config, key: str) -> dict[str, Value]:
        """A module's parameters inside a region: DTensors of the placements its ``state_shardings`` declare
        on the axis (``local_map`` converts its inputs only)."""
        state = config.get("state_shardings")
        declared = {name: on(layout, self.axis) for name, layout in state.items()} if isinstance(state, dict) else {}
        return {name: Value(type=axis_type, dtensor=True, sources=frozenset({key}))
                for name, axis_type in declared.items() if axis_type is not None}

    def _statement(self, statement: ast.stmt, frame: _Frame) -> None:
        """``if isinstance(self.w, DTensor):`` on a parameter a layout distributes runs its body only."""
        if isinstance(statement, ast.If) and self._distributed_parameter(statement.test, frame):
            self._block(statement.body, frame)
        else:
            super()._statement(statement, frame)

    def _distributed_parameter(self, test: ast.expr, frame: _Frame) -> bool:
        if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance"
                and len(test.args) == 2 and ast.unparse(test.args[1]).split(".")[-1] == "DTensor"):
            return False
        tested = test.args[0]
        return isinstance(tested, ast.Attribute) and isinstance(tested.value, ast.Name) \
            and tested.value.id == "self" and (held := frame.parameters.get(tested.attr)) is not None \
            and held.dtensor and held.type is not None

    def _call(self, node: ast.Call, frame: _Frame) -> Value:
        """``p.to_local()`` of a distributed parameter: the local tensor, read with its placement as the
        gradient's (DTensor's default); ``self.d.m(...)`` of a helper the module builds from its config
        (``self.token_dispatcher = config.token_dispatcher.build()``): the method ``m`` of the class its
        config field is annotated with."""
        callee = node.func
        if isinstance(callee, ast.Attribute) and callee.attr == "to_local" and not node.args and not node.keywords:
            held = self.expr(callee.value, frame)
            if held.dtensor and held.type is not None:
                read = region_input_type(_placement(held.type), None)
                return Value(type=read, sources=held.sources) if read is not None else UNKNOWN
        helper = self._helper(callee, frame) if isinstance(callee, ast.Attribute) else None
        if helper is not None and isinstance(callee, ast.Attribute) \
                and not any(isinstance(a, ast.Starred) for a in node.args):
            args = [self.expr(a, frame) for a in node.args]
            keywords = {k.arg: self.expr(k.value, frame) for k in node.keywords if k.arg is not None}
            return self.forward(helper, _inputs(args, keywords), callee.attr)
        return super()._call(node, frame)

    def _helper(self, callee: ast.Attribute, frame: _Frame) -> Node | None:
        owner, attribute = callee.value, ""
        if isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name) and owner.value.id == "self":
            attribute = owner.attr
        info = frame.node.info
        if not attribute or attribute in frame.node.children or info is None:
            return None
        name = built(self.api, info).get(attribute)
        config = info.get("Config")
        field, _ = field_class(config.node if config is not None and isinstance(config.node, TypeInfo) else None,
                               name) if name is not None else (None, None)
        symbol = lookup_fully_qualified(field.fullname.rpartition(".")[0], self.api.modules) \
            if field is not None and field.name == "Config" else None
        cls = symbol.node if symbol is not None else None
        if not isinstance(cls, TypeInfo) or method(self.api, cls, callee.attr) is None:
            return None
        return Node(".".join(filter(None, [frame.node.path, attribute])), cls)

    def _linear(self, given: Value, weight: AxisType, key: str, where: str, declared: AxisType | None) -> Value:
        """``linear(x, W)``: the local kinds by the op's record, the dims by its global rule (module docstring).

        The contraction may leave a pending sum where the layout declares one (``out_src_shardings`` P: a
        rowwise projection's output), as ``out_partial_axes`` asks in global SPMD.
        """
        assert given.type is not None
        if given.type.kind is Kind.V and given.type.shard is None:
            return UNKNOWN  # a shard whose dim the evaluator lost (a view): no dims to judge
        # the local kinds only: the dims are the global rule's to judge
        local = self.op("linear", [given, Value(type=weight.local, sources=frozenset({key}))], where)
        if local.type is None:
            return local
        partial = "sum" if declared is not None and declared.kind is Kind.P else None
        counted = _from_the_back(weight)
        try:
            # sharding's rules load on first use (global SPMD's import cost only where a layout is judged)
            result = sharding.propagate(sharding.Linear(), [given.type, counted], self.axis, "linear", local.type, partial)
        except SpmdTypeError as error:
            why = error.message.split(" Fix")[0].replace(counted.on(self.axis), weight.on(self.axis))
            self.problems.append(Problem(
                (key, *sorted(given.sources - {key})),
                f'{where}: "{key}" (weight {weight.on(self.axis)}) is given {given.type.on(self.axis)}'
                f"{_from(given, key)}: {why}"))
            return UNKNOWN
        return Value(type=result, sources=local.sources) if result is not None else local


def _carried(rule: Rule, count: int) -> set[int]:
    """The operands an op's rule carries a gradient through (not those it selects with)."""
    if isinstance(rule, Variadic):
        return set(range(rule.start, count))
    if isinstance(rule, Arg):
        return {rule.index}
    if not isinstance(rule, Apply):
        return set()
    operands = rule.operands[1:] if rule.linearity is Linearity.SELECT else rule.operands
    return set().union(*(_carried(operand, count) for operand in operands))


def _selectors(rule: Rule) -> set[int]:
    """The operands an op's rule selects with (indices, masks)."""
    if not isinstance(rule, Apply):
        return set()
    first = rule.operands[0] if rule.linearity is Linearity.SELECT and rule.operands else None
    return ({first.index} if isinstance(first, Arg) else set()).union(*(_selectors(o) for o in rule.operands))


def _placement(declared: AxisType) -> Placement:
    """The DTensor placement a layout's type on one axis resolves to (spmd_types'
    ``spmd_type_to_dtensor_placement``: ``R`` and ``I`` are ``Replicate()``)."""
    if declared.kind is Kind.P:
        return Placement("Partial")
    if declared.kind is Kind.V and declared.shard is not None:
        return shard(declared.shard)
    return REPLICATE


def _forward(api: TypeChecker, node: Node) -> bool:
    return node.info is not None and method(api, node.info, "forward") is not None


def _parameters(api: TypeChecker, node: Node) -> list[str]:
    found = method(api, node.info, "forward") if node.info is not None else None
    return [a.arg for a in [*found[1].args.posonlyargs, *found[1].args.args]][1:] if found is not None else []


def _class_name(node: Node) -> str:
    return node.info.name if node.info is not None else node.path


def _from_the_back(weight: AxisType) -> AxisType:
    """A 2-D weight's shard dim counted from the back, as the input's features are (``S(1)`` is ``S(-1)``)."""
    return Shard(weight.shard - 2) if weight.kind is Kind.V and weight.shard is not None and weight.shard >= 0 \
        else weight


def _from(value: Value, key: str) -> str:
    others = sorted(value.sources - {key})
    return " from " + ", ".join(f'"{other}"' for other in others) if others else ""
