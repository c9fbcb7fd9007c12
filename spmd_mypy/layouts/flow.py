"""A setter's attached layouts run through its owner's ``forward`` (the plans' evaluator, :class:`Flow`).

The owner's input is what its ``in_dst_shardings`` declare (the framework
redistributes to it).  A sub-module with a layout attached by the same
setter takes its input as given (or as its ``in_dst_shardings`` declare),
computes its op with the parameters of its ``state_shardings``, must
compute its ``out_src_shardings``, and hands on its ``out_dst_shardings``
(else its ``out_src_shardings``).  A sub-module whose layout is attached
elsewhere hands on an unknown value.  ``nn.Linear``'s ``x @ W.T`` is judged
by dims with global SPMD's ``linear`` rule (:mod:`spmd_stubs.core.sharding`):
``x`` sharded on its features (``S(-1)``) needs ``W``'s input features
sharded (``S(1)``) and gives ``P``, which the layout must declare; a whole
``x`` with ``W``'s output features sharded (``S(0)``) gives ``S(-1)``.
"""

from __future__ import annotations

from typing import Any, Mapping

from mypy.checker import TypeChecker

from spmd_mypy.layouts.values import Config, Layout
from spmd_mypy.plans.flow import UNKNOWN, Flow, Problem, Value
from spmd_mypy.plans.tree import Node, method
from spmd_stubs.core import AxisType, Kind, Shard, SpmdTypeError, sharding
from spmd_stubs.core.parallel_styles import accepts
from spmd_stubs.core.torch_ops.modules import BY_MODULE


def on(layout: Any, axis: str) -> AxisType | None:
    return layout.on(axis) if isinstance(layout, Layout) else None


class LayoutFlow(Flow):
    """One evaluation of an owner's ``forward`` with the layouts ``configs`` (by sub-module path) attach;
    ``names`` shows a path as the setter writes it."""

    def __init__(self, api: TypeChecker, axis: str, configs: Mapping[str, Config], names: Mapping[str, str]) -> None:
        super().__init__(api, axis, {}, strict=True)
        self.configs, self.names = configs, names

    def run_owner(self, root: Node) -> None:
        found = method(self.api, root.info, "forward") if root.info is not None else None
        config = self.configs.get("")
        if found is None or config is None:
            return
        inputs = config.get("in_dst_shardings") or config.get("in_src_shardings") or {}
        seeds = {name: Value(type=on(layout, self.axis), sources=frozenset({self.names[""]}))
                 for name, layout in inputs.items() if on(layout, self.axis) is not None} \
            if isinstance(inputs, dict) else {}
        self.forward(root, seeds)

    def call(self, node: Node, args: list[Value], where: str, owner: Node | None = None) -> Value:
        """``self.X(*args)`` in ``owner.forward`` where ``self.X`` is ``node``."""
        config = self.configs.get(node.path)
        if config is None:
            return UNKNOWN
        key = self.names[node.path]
        given = args[0] if args else UNKNOWN
        inputs = config.get("in_dst_shardings")
        if isinstance(inputs, dict) and len(inputs) == 1 and on(next(iter(inputs.values())), self.axis):
            given = Value(type=on(next(iter(inputs.values())), self.axis), sources=frozenset({key}))
        state = config.get("state_shardings") or {}
        weight = on(state.get("weight"), self.axis) if isinstance(state, dict) else None
        form = next((BY_MODULE[b.fullname] for b in node.info.mro if b.fullname in BY_MODULE), None) \
            if node.info is not None else None
        computed = self._linear(given, weight, key, where, on(config.get("out_src_shardings"), self.axis)) \
            if form is not None and form.op == "linear" and given.type is not None and weight is not None \
            else UNKNOWN
        produced, handed = on(config.get("out_src_shardings"), self.axis), on(config.get("out_dst_shardings"), self.axis)
        if computed.type is not None and produced is not None and not accepts(produced, computed.type, strict=True):
            self.problems.append(Problem(
                (key, *sorted(computed.sources - {key})),
                f'"{key}" computes {computed.type.on(self.axis)} from {given.type.on(self.axis) if given.type else "?"}'
                f"{_from(given, key)} and its weight {weight.on(self.axis) if weight else '?'} where its "
                f"out_src_shardings declare {produced.on(self.axis)} (mesh axis {self.axis})"))
        result = handed or produced
        return Value(type=result, sources=frozenset({key})) if result is not None else computed

    def _linear(self, given: Value, weight: AxisType, key: str, where: str, declared: AxisType | None) -> Value:
        """``linear(x, W)``: the local kinds by the op's record, the dims by its global rule (module docstring).

        The contraction may leave a pending sum where the layout declares one (``out_src_shardings`` P: a
        rowwise projection's output), as ``out_partial_axes`` asks in global SPMD.
        """
        assert given.type is not None
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


def _from_the_back(weight: AxisType) -> AxisType:
    """A 2-D weight's shard dim counted from the back, as the input's features are (``S(1)`` is ``S(-1)``)."""
    return Shard(weight.shard - 2) if weight.kind is Kind.V and weight.shard is not None and weight.shard >= 0 \
        else weight


def _from(value: Value, key: str) -> str:
    others = sorted(value.sources - {key})
    return " from " + ", ".join(f'"{other}"' for other in others) if others else ""
