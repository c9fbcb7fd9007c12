"""Layouts held as data: the values a setter computes and attaches.

``SpmdLayout({axis: type}, partition_spec=...)`` is a :class:`Layout`,
``ShardingConfig(field=...)`` a :class:`Config`,
``LocalMapConfig(in_grad_placements=...)`` a :class:`LocalMap`, and a
module config reached from the setter's parameter (``cfg.attention.wo``) a
:class:`ConfigRef`.  Anything the evaluator cannot compute is
:data:`UNKNOWN`, which decides no branch and no type.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Mapping

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

    def replaced(self, name: str, value: Any) -> Config:
        return Config(tuple((k, value if k == name else v) for k, v in self.fields))


@dataclass(frozen=True)
class LocalMap:
    """A ``LocalMapConfig``: the gradient layout of each positional input (None: left out), or None for
    none given."""

    gradients: tuple[Any, ...] | None


@dataclass(frozen=True)
class ConfigRef:
    """A module config: the setter's parameter (path ``""``) or a field under it (``attention.wo``; a list
    of configs iterated is ``layers.*``)."""

    path: str

    def child(self, name: str) -> ConfigRef:
        return ConfigRef(f"{self.path}.{name}" if self.path else name)


@dataclass(frozen=True)
class Attachment:
    """``<config>.sharding_config = <value>`` evaluated: the config's path, the value, the statement, the
    module it is written in, the statement of the checked setter it runs under (itself, or the call that
    leads to it: ``anchor``), the bool parameters of the statement's function (a fix's builder takes them)
    and the configs its names held there (a fix may attach another)."""

    path: str
    value: Any
    node: ast.Assign
    module: str
    anchor: ast.stmt
    flags: tuple[tuple[str, bool], ...] = ()
    configs: tuple[tuple[str, Config], ...] = ()

    @property
    def written(self) -> str:
        """The config as the statement writes it (``feed_forward_cfg.w2``)."""
        target = self.node.targets[0]
        assert isinstance(target, ast.Attribute)
        return ast.unparse(target.value)


@dataclass(frozen=True)
class Unevaluated:
    """What the evaluator could not follow in a setter: the statement in the checked function it is in or
    under (``line``), and the reason."""

    line: int
    column: int
    reason: str


@dataclass
class World:
    """One run of a setter: a value of each flag and of each condition on the configs it tests, with what
    it attaches (by config path), the classes it narrows configs to, and what it could not follow."""

    flags: dict[str, bool] = field(default_factory=dict)
    attachments: dict[str, Attachment] = field(default_factory=dict)
    classes: dict[str, Any] = field(default_factory=dict)
    unevaluated: list[Unevaluated] = field(default_factory=list)


def construct(callee: str, args: list[Any], keywords: Mapping[str, Any]) -> Any:
    """``spmd.S(d)``, ``SpmdLayout``, ``ShardingConfig`` and ``LocalMapConfig`` as values (None: not one of
    them)."""
    if callee == "spmd.S" and len(args) == 1 and isinstance(args[0], int):
        return Shard(args[0])
    if callee == "SpmdLayout" and len(args) == 1 and isinstance(args[0], dict):
        return layout(args[0], keywords.get("partition_spec"))
    if callee == "ShardingConfig" and not args and set(keywords) <= set(FIELDS):
        return Config(tuple(sorted(keywords.items(), key=lambda item: FIELDS.index(item[0]))))
    if callee == "LocalMapConfig" and not args and set(keywords) == {"in_grad_placements"}:
        gradients = keywords["in_grad_placements"]
        return LocalMap(gradients) if gradients is None or isinstance(gradients, tuple) else UNKNOWN
    return None


def layout(types: Mapping[str, Any], spec: Any) -> Any:
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


def on(layout: Any, axis: str) -> AxisType | None:
    return layout.on(axis) if isinstance(layout, Layout) else None
