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
"""

from __future__ import annotations

from typing import Any, Collection, Mapping

from mypy.checker import TypeChecker

from spmd_mypy.layouts.values import Config, LocalMap, on
from spmd_mypy.plans.flow import UNKNOWN, Flow, Problem, Value
from spmd_mypy.plans.tree import Node, method
from spmd_stubs.core import AxisType, Kind, Shard, SpmdTypeError, sharding
from spmd_stubs.core.local_regions import region_input_type, region_output_type
from spmd_stubs.core.parallel_styles import REPLICATE, Placement, accepts, shard
from spmd_stubs.core.torch_ops.modules import BY_MODULE

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
        if _forward(self.api, node):
            computed = self.forward(node, dict(enumerate(inputs)))
        elif linear and given.type is not None and weight is not None:
            computed = self._linear(given, weight, key, where or f"{_class_name(node)}.forward", produced)
        else:
            computed = UNKNOWN
        region = isinstance(config.get("local_map"), LocalMap)
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
