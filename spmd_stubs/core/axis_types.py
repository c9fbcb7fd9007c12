"""The SPMD types of one tensor: a type per mesh axis (docs/spec.md#types).

=====  ==========  ============================================  ========
type   name        forward value across the axis                  gradient
=====  ==========  ============================================  ========
R      replicate   the same on every rank, N independent uses     P
I      invariant   the same on every rank, one logical use        I
V      varying     different per rank (a list of tensors)         V
P      partial     different per rank, meaning their pending sum  R
S(i)   shard       V whose global meaning is ``cat(xs, dim=i)``   S(i)
=====  ==========  ============================================  ========

In local SPMD ``S(i)`` *is* V: the shard dim only picks concat/split over
stack/unbind inside the collectives.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence, Union

from spmd_stubs.core.errors import Code, SpmdTypeError


class Kind(enum.Enum):
    R = "R"
    I = "I"  # noqa: E741 -- the spec's name for invariant (docs/spec.md#types)
    V = "V"
    P = "P"

    # Members are singletons that compare by identity, so they may hash by it,
    # in C: ``Enum.__hash__`` is a Python call, and every AxisType's hash makes
    # one (some 80,000 per 10k lines checked).
    __hash__ = object.__hash__

    @property
    def title(self) -> str:
        return _KIND_TITLES[self]


_KIND_TITLES = {Kind.R: "Replicate", Kind.I: "Invariant", Kind.V: "Varying", Kind.P: "Partial"}


REDUCE_OPS = ("sum", "avg", "max", "min")
"""The reductions a Partial can be pending (docs/spec.md#pending-reductions): those a Replicate value
can be partitioned into exactly.  ``product`` and the bitwise ops cannot, so
they are not types."""


@dataclass(frozen=True)
class AxisType:
    """The SPMD type of a tensor on one mesh axis.

    ``shard`` is set only for V and records the tensor dim of ``S(i)``.
    Negative dims are kept as written (``S(-1)`` is the last dim).

    ``order`` is set only for a shard whose tensor dim several axes shard:
    this axis's position among them, 0 the major one.  ``S(0)@(dp,tp)`` gives
    dp order 0 and tp order 1 (dim 0 is split over dp, each part over tp).

    ``reduce`` is set only for P: the pending reduction (docs/spec.md#pending-reductions), ``sum``
    (``P``), ``avg`` (``Pavg``), ``max`` (``Pmax``) or ``min`` (``Pmin``).
    """

    kind: Kind
    shard: int | None = None
    order: int | None = None
    reduce: str = "sum"

    def __post_init__(self) -> None:
        if self.shard is not None and self.kind is not Kind.V:
            raise ValueError(f"only a varying type can be a shard, not {self.kind.value}")
        if self.order is not None and self.shard is None:
            raise ValueError("only a shard has an order among the axes sharding its dim")
        if self.reduce != "sum" and self.kind is not Kind.P:
            raise ValueError(f"only a partial type has a reduction, not {self.kind.value}")
        if self.reduce not in REDUCE_OPS:
            raise ValueError(
                f"a Partial reduction must be one of {', '.join(REDUCE_OPS)}, not {self.reduce!r}"
            )

    def __str__(self) -> str:
        if self.shard is not None:
            return f"S({self.shard})"
        if self.reduce != "sum":
            return f"P{self.reduce}"
        return self.kind.value

    @property
    def local(self) -> "AxisType":
        """The local type: shard dim and order forgotten (``S(i)`` -> ``V``)."""
        return AxisType(self.kind, reduce=self.reduce)

    @property
    def extremum(self) -> bool:
        """A pending max or min: only order-preserving ops may keep it."""
        return self.reduce in ("max", "min")

    def on(self, axis: str) -> str:
        """Print as the user writes it: ``R@tp``."""
        return f"{self}@{axis}"


Replicate = AxisType(Kind.R)
Invariant = AxisType(Kind.I)
Varying = AxisType(Kind.V)
Partial = AxisType(Kind.P)


def Shard(dim: int, order: int | None = None) -> AxisType:  # noqa: N802 -- mirrors the spec's S(i)
    return AxisType(Kind.V, dim, order)


def PartialOf(reduce: str) -> AxisType:  # noqa: N802 -- mirrors Partial
    """A pending ``reduce`` (``"sum"``, ``"avg"``, ``"max"`` or ``"min"``)."""
    return AxisType(Kind.P, reduce=reduce)


class Scalar:
    """A python number operand: it takes the type of what it meets."""

    _instance: "Scalar | None" = None

    def __new__(cls) -> "Scalar":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "scalar"

    __str__ = __repr__


SCALAR = Scalar()

Operand = Union[AxisType, Scalar, None]
"""One operand on one axis: a type, a python scalar, or None (unknown)."""

_AXIS_TYPE_RE = re.compile(
    r"^\s*(?:(?P<kind>[RIV])|P(?P<reduce>avg|max|min)?|S\(\s*(?P<dim>[+-]?\d+)\s*\))\s*$"
)


def parse_axis_type(text: str) -> AxisType:
    """``"R"`` / ``"Pmax"`` / ``"S(-1)"`` -> AxisType; ValueError with the fix otherwise."""
    match = _AXIS_TYPE_RE.match(text)
    if match is None:
        raise ValueError(
            f"unknown SPMD type {text!r}: write one of R, I, V, P, Pavg, Pmax, Pmin or S(dim), e.g. S(0)"
        )
    if match.group("dim") is not None:
        return Shard(int(match.group("dim")))
    if match.group("kind") is None:
        return PartialOf(match.group("reduce") or "sum")
    return AxisType(Kind(match.group("kind")))


def _split_top_level(text: str) -> list[str]:
    """Split on the commas outside parentheses: ``"S(0)@(dp,tp),R@cp"`` -> two entries."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


@dataclass(frozen=True)
class TensorType:
    """A tensor's SPMD type on every axis it mentions.

    Axes not mentioned are unconstrained.  The canonical text (axes sorted by
    name, ``"R@tp,V@dp"`` order-independent; axes sharding one dim in a known
    order grouped major first, ``"S(0)@(dp,tp)"``) is what the mypy plugin
    stores in its hidden type argument; :meth:`parse` reads it back.
    """

    axes: tuple[tuple[str, AxisType], ...]

    @classmethod
    def of(cls, mapping: Mapping[str, AxisType]) -> "TensorType":
        return cls(tuple(sorted(mapping.items(), key=lambda item: item[0])))

    @classmethod
    def parse(cls, text: str) -> "TensorType":
        """``"S(0)@(dp,tp), R@cp"`` -> its TensorType (ValueError, with the fix, for bad text)."""
        return tensor_type_from(
            (entry for part in _split_top_level(text) for entry in _parse_entry(part)), where=repr(text)
        )

    def as_dict(self) -> dict[str, AxisType]:
        return dict(self.axes)

    def get(self, axis: str) -> AxisType | None:
        for name, axis_type in self.axes:
            if name == axis:
                return axis_type
        return None

    def shard_axes(self, dim: int) -> tuple[str, ...]:
        """The axes sharding tensor dim ``dim`` as written, major first.

        Axes with no order (each written on its own) come after the ordered
        ones, by name; :meth:`unordered_dims` says where that happened.
        """
        sharding = [(t.order if t.order is not None else len(self.axes), axis)
                    for axis, t in self.axes if t.shard == dim]
        return tuple(axis for _, axis in sorted(sharding))

    def unordered_dims(self) -> list[int]:
        """Dims that several axes shard without a written order (``S(0)@dp, S(0)@tp``)."""
        counts: dict[int, int] = {}
        for _, t in self.axes:
            if t.shard is not None and t.order is None:
                counts[t.shard] = counts.get(t.shard, 0) + 1
        return sorted(dim for dim, count in counts.items() if count > 1)

    def _entries(self) -> list[str]:
        """``TYPE@axis`` entries, ordered shards of one dim grouped: ``S(0)@(dp,tp)``."""
        entries: list[str] = []
        grouped: set[int] = set()
        for axis, t in self.axes:
            if t.order is None:
                entries.append(t.on(axis))
            elif t.shard not in grouped:
                grouped.add(t.shard)  # type: ignore[arg-type]
                group = [a for a in self.shard_axes(t.shard) if self.as_dict()[a].order is not None]  # type: ignore[arg-type]
                entries.append(f"S({t.shard})@({','.join(group)})")
        return entries

    def canonical(self) -> str:
        return ",".join(self._entries())

    def __str__(self) -> str:
        return ", ".join(self._entries())


def _parse_entry(part: str) -> list[tuple[str, AxisType]]:
    """One ``TYPE@axis`` (or ``S(i)@(a, b)``) of a TensorType's text -> its ``(axis, type)`` entries."""
    kind_text, sep, written = part.partition("@")
    if not sep or not written.strip():
        raise ValueError(f"expected TYPE@axis, got {part!r}")
    return _spread(parse_axis_type(kind_text), written.strip())


def _spread(axis_type: AxisType, written: str) -> list[tuple[str, AxisType]]:
    """``S(0)`` over ``"(dp,tp)"`` -> dp as S(0) order 0, tp as S(0) order 1."""
    if not (written.startswith("(") and written.endswith(")")):
        return [(written, axis_type)]
    return shard_group(axis_type, [name.strip() for name in written[1:-1].split(",") if name.strip()])


def shard_group(axis_type: AxisType, axes: Sequence[str]) -> list[tuple[str, AxisType]]:
    """``S(0)`` written over the axes ``(dp, tp)``: dp gets S(0) order 0, tp order 1 (major first).

    One axis keeps the type as written; several need a shard (ValueError otherwise).
    """
    if len(axes) == 1:
        return [(axes[0], axis_type)]
    if axis_type.shard is None or not axes:
        raise ValueError(f"only a shard spans several axes, e.g. S(0)@(dp, tp); give {axis_type} one axis")
    return [(axis, Shard(axis_type.shard, order)) for order, axis in enumerate(axes)]


# --------------------------------------------------------------------------
# One type per mesh axis
# --------------------------------------------------------------------------


class DuplicateAxisError(SpmdTypeError):
    """A mesh axis given twice where each axis takes one type, or is named once.

    A ``ValueError`` (through :class:`~spmd_stubs.core.SpmdTypeError`):
    ``axis`` is the repeated axis, ``code`` the rule the caller reports it
    under (``spmd-annotation`` unless it says otherwise).  Every place that
    reads types or axes raises it, with one message shape: ``[where: ]axis
    tp is given twice (R@tp and V@tp). Fix: give each mesh axis one type.``.
    """

    malformed = True


def tensor_type_from(
    entries: Iterable[tuple[str, AxisType]], where: str = "", code: Code = Code.ANNOTATION
) -> TensorType:
    """``[("tp", R), ("dp", S(0))]`` -> their TensorType: one type per mesh axis (docs/spec.md#types).

    An axis given twice raises :class:`DuplicateAxisError` naming the axis,
    both types and the fix; ``where`` (e.g. ``"redistribute's src"``) starts
    the message, ``code`` is the error code it carries.

    >>> str(tensor_type_from([("tp", Replicate), ("dp", Shard(0))]))
    'S(0)@dp, R@tp'
    >>> tensor_type_from([("tp", Replicate), ("tp", Varying)])
    Traceback (most recent call last):
    ...
    spmd_stubs.core.axis_types.DuplicateAxisError: axis tp is given twice (R@tp and V@tp). Fix: give each mesh axis one type.
    """
    mapping: dict[str, AxisType] = {}
    for axis, axis_type in entries:
        if axis in mapping:
            both = f"({mapping[axis].on(axis)} and {axis_type.on(axis)})"
            raise _given_twice(axis, both, "give each mesh axis one type", where, code)
        mapping[axis] = axis_type
    return TensorType.of(mapping)


def distinct_axes(names: Iterable[str], where: str = "", code: Code = Code.ANNOTATION) -> tuple[str, ...]:
    """``names`` (mesh axes, as a binding or a decorator lists them) with each axis at most once.

    An axis named twice raises :class:`DuplicateAxisError` in the shape of
    :func:`tensor_type_from`'s, showing the names as given.

    >>> distinct_axes(["dp", "tp", "dp"])
    Traceback (most recent call last):
    ...
    spmd_stubs.core.axis_types.DuplicateAxisError: axis dp is given twice in (dp, tp, dp). Fix: name each mesh axis once.
    """
    names = tuple(names)
    for index, name in enumerate(names):
        if name in names[:index]:
            raise _given_twice(name, f"in ({', '.join(names)})", "name each mesh axis once", where, code)
    return names


def _given_twice(axis: str, detail: str, fix: str, where: str, code: Code) -> DuplicateAxisError:
    prefix = f"{where}: " if where else ""
    return DuplicateAxisError(code, axis, f"{prefix}axis {axis} is given twice {detail}. Fix: {fix}.")
