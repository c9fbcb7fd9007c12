"""The SPMD type algebra: the one place where the rules live.

Pure Python on purpose (no torch, no mypy): the mypy plugin turns a
:class:`SpmdTypeError` into a static diagnostic, the runtime shim raises it as
a ``ValueError``.  Both therefore speak with the same words.

Vocabulary (seed 000, "Local SPMD"), judged per mesh axis:

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

The module answers three kinds of question:

* **Op rules** -- :func:`evaluate` gives the type of an ordinary torch op on
  one axis from its operands, given the op's linearity written as an
  expression (:class:`Arg`, :class:`Apply`).  Composite ops are expressions:
  ``addmm(b, m1, m2)`` is ``Apply(ADDITIVE, Arg(0), Apply(MULTILINEAR,
  Arg(1), Arg(2)))``.
* **Transitions** -- :func:`transition` says whether ``convert(I, P)`` (or any
  collective/cast with a src/dst pair) exists, whether it needs
  ``expert_mode``, and what to call instead when it does not.
* **Duality** -- :func:`dual` and :func:`backward_of` give the gradient type
  and the backward operation of every forward operation (seed 000, "Comms by
  forwards-backwards").
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence, Union

__all__ = [
    "Kind",
    "AxisType",
    "Replicate",
    "Invariant",
    "Varying",
    "Partial",
    "Shard",
    "PartialOf",
    "REDUCE_OPS",
    "shard_group",
    "Monotone",
    "SCALAR",
    "Scalar",
    "TensorType",
    "Linearity",
    "Arg",
    "Apply",
    "Expr",
    "SpmdTypeError",
    "Code",
    "dual",
    "evaluate",
    "Step",
    "transition",
    "backward_of",
    "route",
    "check_source",
    "check_inplace",
    "check_loss",
    "check_asserted",
    "parse_axis_type",
    "COLLECTIVES",
]


# --------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------


class Kind(enum.Enum):
    R = "R"
    I = "I"  # noqa: E741 -- the seed's name for invariant
    V = "V"
    P = "P"

    @property
    def title(self) -> str:
        return _KIND_TITLES[self]


_KIND_TITLES = {Kind.R: "Replicate", Kind.I: "Invariant", Kind.V: "Varying", Kind.P: "Partial"}


REDUCE_OPS = ("sum", "avg", "max", "min")
"""The reductions a Partial can be pending (seed 001): those a Replicate value
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

    ``reduce`` is set only for P: the pending reduction (seed 001), ``sum``
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


def Shard(dim: int, order: int | None = None) -> AxisType:  # noqa: N802 -- mirrors the seed's S(i)
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
        mapping: dict[str, AxisType] = {}
        for part in _split_top_level(text):
            kind_text, sep, written = part.partition("@")
            if not sep or not written.strip():
                raise ValueError(f"expected TYPE@axis, got {part!r}")
            axis_type = parse_axis_type(kind_text)
            for axis, typ in _spread(axis_type, written.strip()):
                if axis in mapping:
                    raise ValueError(f"axis {axis} is given twice in {text!r}")
                mapping[axis] = typ
        return cls.of(mapping)

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
# Errors
# --------------------------------------------------------------------------


class Code(str, enum.Enum):
    """Error codes; all are sub-codes of ``spmd`` in the plugin."""

    PARTIAL_MUL = "spmd-partial-mul"
    PARTIAL_AFFINE = "spmd-partial-affine"
    PARTIAL_NONLINEAR = "spmd-partial-nonlinear"
    PARTIAL_VARYING = "spmd-partial-varying"
    INVARIANT_MIX = "spmd-invariant-mix"
    COLLECTIVE = "spmd-collective"
    EXPERT_MODE = "spmd-expert-mode"
    INVALID_TRANSITION = "spmd-invalid-transition"
    BACKWARD = "spmd-backward"
    ANNOTATION = "spmd-annotation"
    ASSERT = "spmd-assert"
    INPLACE = "spmd-inplace"
    UNTYPED_COLLECTIVE = "spmd-untyped-collective"
    SHARDED_CONTRACTION = "spmd-sharded-contraction"
    SHARD_MISMATCH = "spmd-shard-mismatch"


class SpmdTypeError(ValueError):
    """A rule violation: ``code`` names the rule, ``axis`` the mesh axis.

    ``str(err)`` is the full message, ending with the concrete fix.
    """

    def __init__(self, code: Code, axis: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.axis = axis
        self.message = message


# --------------------------------------------------------------------------
# Op rules
# --------------------------------------------------------------------------


class Linearity(enum.Enum):
    """How an op treats a pending sum (P) in its operands.

    NONLINEAR    f(sum a) != sum f(a): no P operand allowed (gelu, exp, softmax).
    LINEAR       unary and linear: P -> P (neg, views, sum over dims, clone).
    ADDITIVE     n-ary sum-like: all P -> P, P with anything else is "affine"
                 (add, sub, cat, stack).
    MULTILINEAR  linear in each factor: exactly one P factor, the rest R or
                 scalars (mul, matmul, einsum, div by a non-P denominator).
    SELECT       first operand is a non-differentiable selector (index, mask,
                 condition), the second the data; a replicated selector is
                 neutral, a varying one makes the result vary, a partial one
                 is meaningless.
    """

    NONLINEAR = "nonlinear"
    LINEAR = "linear"
    ADDITIVE = "additive"
    MULTILINEAR = "multilinear"
    SELECT = "select"


@dataclass(frozen=True)
class Arg:
    """The ``index``-th operand of the op."""

    index: int


@dataclass(frozen=True)
class Apply:
    """``linearity`` applied to sub-expressions (the decomposition of an op)."""

    linearity: Linearity
    operands: tuple["Expr", ...]

    def __init__(self, linearity: Linearity, *operands: "Expr") -> None:
        object.__setattr__(self, "linearity", linearity)
        object.__setattr__(self, "operands", tuple(operands))


Expr = Union[Arg, Apply]


def _show(operand: AxisType | Scalar, axis: str) -> str:
    return "scalar" if isinstance(operand, Scalar) else operand.on(axis)


def _shown(operands: Iterable[AxisType | Scalar], axis: str, sep: str) -> str:
    return sep.join(_show(o, axis) for o in operands)


def _reduce_fix(axis: str, dst: str = "R", src: AxisType | None = None) -> str:
    return f"all_reduce(x, {axis}, src={src or Partial}, dst={dst})"


def _partials(operands: Sequence[AxisType | Scalar]) -> list[AxisType]:
    return [o for o in operands if isinstance(o, AxisType) and o.kind is Kind.P]


def _one_reduction(partial: Sequence[AxisType], operands: Sequence[AxisType | Scalar], op: str, axis: str) -> AxisType:
    """The pending reduction the partial operands share; mixing two is an error."""
    reductions = {p.reduce for p in partial}
    if len(reductions) > 1:
        second = sorted(set(partial), key=str)[1]
        raise SpmdTypeError(
            Code.PARTIAL_AFFINE,
            axis,
            f"{op} combines two different pending reductions on axis {axis} "
            f"({_shown(operands, axis, ', ')}); their parts cannot be reduced together. "
            f"Fix: resolve one first, e.g. {_reduce_fix(axis, src=second)} on the "
            f"{second.on(axis)} operand.",
        )
    return partial[0].local


def _plain_combine(operands: Sequence[AxisType | Scalar], op: str, axis: str) -> AxisType:
    """Combine operands none of which is P: R/I/V and scalars."""
    tensors = [o for o in operands if isinstance(o, AxisType)]
    kinds = {t.kind for t in tensors}
    if Kind.I in kinds and kinds != {Kind.I}:
        other = next(t for t in tensors if t.kind is not Kind.I)
        raise SpmdTypeError(
            Code.INVARIANT_MIX,
            axis,
            f"{op} mixes Invariant with {other.kind.title} on axis {axis} "
            f"({_shown(operands, axis, ', ')}); an Invariant value must get the same "
            f"gradient on every rank, which its use beside {other.on(axis)} cannot promise. "
            f"Fix: convert(x, {axis}, src=I, dst=R) on the Invariant operand before {op}.",
        )
    if Kind.V in kinds:
        return Varying
    if kinds == {Kind.I}:
        return Invariant
    return Replicate


def _nonlinear(operands: Sequence[AxisType | Scalar], op: str, axis: str) -> AxisType:
    partial = _partials(operands)
    if partial:
        raise SpmdTypeError(
            Code.PARTIAL_NONLINEAR,
            axis,
            f"{op} is nonlinear but gets a Partial operand on axis {axis} "
            f"({_shown(operands, axis, ', ')}); f(sum of parts) is not the sum of "
            f"f(parts). Fix: {_reduce_fix(axis, src=partial[0])} (or dst=I) before {op}.",
        )
    return _plain_combine(operands, op, axis)


def _additive(operands: Sequence[AxisType | Scalar], op: str, axis: str) -> AxisType:
    partial = _partials(operands)
    if not partial:
        return _plain_combine(operands, op, axis)
    result = _one_reduction(partial, operands, op, axis)
    others = [o for o in operands if not (isinstance(o, AxisType) and o.kind is Kind.P)]
    if not others:
        return result
    shown = _shown(operands, axis, " + ")
    other = others[0]
    if isinstance(other, AxisType) and other.kind is Kind.I:
        raise SpmdTypeError(
            Code.INVARIANT_MIX,
            axis,
            f"{op} mixes Invariant with Partial on axis {axis} ({shown}). "
            f"Fix: {_reduce_fix(axis, 'I', result)} on the Partial operand before {op}.",
        )
    if isinstance(other, AxisType) and other.kind is Kind.V:
        raise SpmdTypeError(
            Code.PARTIAL_VARYING,
            axis,
            f"{op} adds a Partial to a Varying operand on axis {axis} ({shown}); the sum "
            f"would mix one pending sum with per-rank values. Fix: "
            f"reduce_scatter(x, {axis}, src={result}, dst=V) (or {_reduce_fix(axis, src=result)}) "
            f"on the Partial operand first.",
        )
    if result.reduce == "avg":
        # avg(x_r + c) = avg(x_r) + c: a replicated term is counted once.
        return result
    raise SpmdTypeError(
        Code.PARTIAL_AFFINE,
        axis,
        f"{op} adds a Partial to a non-Partial operand on axis {axis} ({shown}); the "
        f"{_show(other, axis)} term would be counted once per rank by the pending sum. "
        f"Fix: {_reduce_fix(axis)} on the Partial operand first, or "
        f"convert(y, {axis}, src=R, dst=P) on the other term.",
    )


def _multilinear(operands: Sequence[AxisType | Scalar], op: str, axis: str) -> AxisType:
    partial = _partials(operands)
    if not partial:
        return _plain_combine(operands, op, axis)
    shown = _shown(operands, axis, " * ")
    if len(partial) > 1:
        raise SpmdTypeError(
            Code.PARTIAL_MUL,
            axis,
            f"{op} multiplies {len(partial)} Partial factors on axis {axis} ({shown}); a "
            f"product of pending sums is not the sum of products. Fix: "
            f"{_reduce_fix(axis, src=partial[0])} on all but one factor first.",
        )
    for other in operands:
        if isinstance(other, AxisType) and other.kind is Kind.V:
            raise SpmdTypeError(
                Code.PARTIAL_VARYING,
                axis,
                f"{op} multiplies a Partial by a Varying factor on axis {axis} ({shown}); "
                f"each rank would scale its part of the sum differently. Fix: "
                f"{_reduce_fix(axis, src=partial[0])} on the Partial factor first.",
            )
        if isinstance(other, AxisType) and other.kind is Kind.I:
            raise SpmdTypeError(
                Code.INVARIANT_MIX,
                axis,
                f"{op} mixes Invariant with Partial on axis {axis} ({shown}). Fix: "
                f"convert(w, {axis}, src=I, dst=R) on the Invariant factor "
                f"(its gradient then gets all-reduced), or {_reduce_fix(axis, 'I', partial[0])} on "
                f"the Partial one.",
            )
    return partial[0].local


def _select(operands: Sequence[AxisType | Scalar], op: str, axis: str) -> AxisType:
    selector, data = operands
    if isinstance(selector, AxisType) and selector.kind is Kind.P:
        raise SpmdTypeError(
            Code.PARTIAL_NONLINEAR,
            axis,
            f"{op} uses a Partial tensor as an index/mask/condition on axis {axis} "
            f"({_show(selector, axis)}); a pending sum cannot select. Fix: "
            f"{_reduce_fix(axis, src=selector)} on it first.",
        )
    if isinstance(selector, AxisType) and selector.kind is Kind.V:
        return _multilinear([selector, data], op, axis)
    # A replicated selector is neutral: it gets no gradient, so R and I
    # selectors both keep the data's type (a scalar takes the selector's).
    return selector.local if isinstance(data, Scalar) else data.local


_RULES = {
    Linearity.NONLINEAR: _nonlinear,
    # A unary linear op is a multilinear op with one factor.
    Linearity.LINEAR: _multilinear,
    Linearity.ADDITIVE: _additive,
    Linearity.MULTILINEAR: _multilinear,
    Linearity.SELECT: _select,
}


class Monotone(enum.Enum):
    """How an op orders its result by an operand: what a pending max/min may pass through.

    A pending max ``Pmax`` means ``max over ranks of the parts``; an op ``f``
    keeps it exactly when ``f(max_r x_r) == max_r f(x_r)``.

    MOVES       data movement (views, indexing, cat, stack): every element keeps its value.
    INCREASING  elementwise non-decreasing in this operand (exp, relu, ``x + c``).
    DECREASING  elementwise non-increasing in this operand (neg, ``c - x``): max becomes min.
    MAX / MIN   a max (min) over tensor dims: commutes with a pending max (min) only.

    A replicated operand is a valid pending max of itself (every rank holds
    it), so R and scalars may sit beside a ``Pmax`` operand of a MOVES op; an
    INCREASING/DECREASING op takes one pending operand, the rest replicated.
    """

    MOVES = "moves"
    INCREASING = "increasing"
    DECREASING = "decreasing"
    MAX = "max"
    MIN = "min"


_FLIPPED = {"max": "min", "min": "max"}

Effect = Union[Monotone, Sequence[Monotone], None]
"""An op's :class:`Monotone` for every operand, or one per operand position."""


def _effect_at(effect: Effect, position: int) -> Monotone | None:
    """The op's :class:`Monotone` in the operand at ``position``."""
    if effect is None or isinstance(effect, Monotone):
        return effect
    return effect[position] if position < len(effect) else None


def _extremum(
    operands: Sequence[tuple[int, AxisType | Scalar]], effect: Effect, op: str, axis: str
) -> AxisType:
    """An op with a pending max/min operand (seed 001: only ops that distribute over it)."""
    values = [value for _, value in operands]
    partial = _partials(values)
    pending = _one_reduction(partial, values, op, axis)
    shown = _shown(values, axis, ", ")
    fix = f"Fix: {_reduce_fix(axis, src=pending)} before {op}"
    for other in values:
        if isinstance(other, AxisType) and other.kind in (Kind.V, Kind.I):
            code = Code.PARTIAL_VARYING if other.kind is Kind.V else Code.INVARIANT_MIX
            raise SpmdTypeError(
                code, axis, f"{op} combines {pending.on(axis)} with {other.on(axis)} on axis {axis} ({shown}). {fix}."
            )
    pending_effects = {
        _effect_at(effect, position) for position, value in operands if isinstance(value, AxisType) and value.kind is Kind.P
    }
    only = next(iter(pending_effects)) if len(pending_effects) == 1 else None
    if only is Monotone.MOVES:
        return pending
    if only in (Monotone.MAX, Monotone.MIN) and only.value == pending.reduce:
        return pending
    if only in (Monotone.INCREASING, Monotone.DECREASING):
        if len(partial) > 1:
            raise SpmdTypeError(
                Code.PARTIAL_MUL,
                axis,
                f"{op} combines {len(partial)} operands pending a {pending.reduce} on axis {axis} "
                f"({shown}); {op} of two {pending.reduce}ima is not the {pending.reduce}imum of the {op}s. "
                f"{fix} on all but one operand.",
            )
        if only is Monotone.INCREASING:
            return pending
        return PartialOf(_FLIPPED[pending.reduce])
    raise SpmdTypeError(
        Code.PARTIAL_NONLINEAR,
        axis,
        f"{op} does not commute with the pending {pending.reduce} of {pending.on(axis)} on axis {axis} "
        f"({shown}): only data movement and ops monotone in that operand (exp, relu, x + c, "
        f"neg, a {pending.reduce} over dims) may keep it. {fix}.",
    )


def evaluate(
    expr: Expr, operands: Sequence[Operand], op: str, axis: str, effect: Effect = None
) -> AxisType | None:
    """The type on ``axis`` of ``expr`` applied to ``operands``.

    ``None`` operands (unknown on this axis: an untyped tensor, or a typed one
    that does not mention the axis) are left out of the judgement, as
    gradual typing asks; when only unknowns and scalars remain, the result is
    unknown.  A result is never a shard: a local op on ``S(i)`` gives V.
    ``effect`` is the op's :class:`Monotone` behaviour, needed only when a
    pending max/min meets the top-level expression.
    Raises :class:`SpmdTypeError` naming ``op`` and ``axis``.
    """
    if isinstance(expr, Arg):
        operand = operands[expr.index] if expr.index < len(operands) else None
        return operand.local if isinstance(operand, AxisType) else None
    known: list[tuple[int, AxisType | Scalar]] = []
    for position, sub in enumerate(expr.operands):
        if isinstance(sub, Arg) and sub.index < len(operands) and isinstance(
            operands[sub.index], Scalar
        ):
            known.append((position, SCALAR))
            continue
        value = evaluate(sub, operands, op, axis)
        if value is not None:
            known.append((position, value))
        elif expr.linearity is Linearity.SELECT:
            return None
    values = [value for _, value in known]
    if not any(isinstance(k, AxisType) for k in values):
        return None
    if any(isinstance(k, AxisType) and k.extremum for k in values):
        return _extremum(known, effect, op, axis)
    return _RULES[expr.linearity](values, op, axis)


# --------------------------------------------------------------------------
# Duality
# --------------------------------------------------------------------------

_DUAL_KIND = {Kind.R: Kind.P, Kind.P: Kind.R, Kind.I: Kind.I, Kind.V: Kind.V}


def dual(axis_type: AxisType) -> AxisType:
    """The gradient's type: R <-> P, I <-> I, V <-> V (a shard keeps its dim).

    A pending avg's gradient is replicated (each part gets ``g / n``); a
    pending max's or min's varies (the part that attains it gets ``g``, split
    between ties), so those two are V.
    """
    if axis_type.extremum:
        return Varying
    return AxisType(_DUAL_KIND[axis_type.kind], axis_type.shard, axis_type.order)


# --------------------------------------------------------------------------
# Transitions: collectives and casts
# --------------------------------------------------------------------------

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
CASTS = ("reinterpret", "convert")
IMPLICIT_PARTIAL = ("all_reduce", "reduce_scatter")
"""Collectives that accept src=V as shorthand for reinterpret(V,P) then src=P."""


@dataclass(frozen=True)
class Step:
    """One operation with its src/dst, e.g. ``all_reduce(P, I)``."""

    op: str
    src: AxisType
    dst: AxisType

    def call(self, axis: str, tensor: str = "x", expert: bool = False) -> str:
        """The call the user writes: ``all_reduce(x, tp, src=P, dst=I)``."""
        flag = ", expert_mode=True" if expert else ""
        return f"{self.op}({tensor}, {axis}, src={self.src}, dst={self.dst}{flag})"

    def __str__(self) -> str:
        return f"{self.op}({self.src},{self.dst})"


R, I, V, P = Kind.R, Kind.I, Kind.V, Kind.P  # noqa: E741

# (op, src kind, dst kind) -> needs expert_mode.  The table of seed 000 "Comms by
# state transition" plus DESIGN section 2's additions: convert(I,R) (identity
# forward, all-reduce backward, Megatron's copy_to_tensor_model_parallel_region)
# and its gated mirror convert(R,I).  reinterpret(I,P) is deliberately absent.
_TRANSITIONS: dict[tuple[str, Kind, Kind], bool] = {
    ("reinterpret", R, I): True,
    ("reinterpret", R, V): True,
    ("reinterpret", R, P): True,
    ("reinterpret", I, R): False,
    ("reinterpret", I, V): False,
    ("reinterpret", V, P): False,
    ("convert", R, V): False,
    ("convert", R, P): False,
    ("convert", I, R): False,
    ("convert", R, I): True,
    ("convert", I, V): False,
    ("convert", I, P): True,
    ("convert", V, P): True,
    ("all_reduce", P, R): False,
    ("all_reduce", P, I): False,
    ("all_gather", V, R): False,
    ("all_gather", V, I): False,
    ("reduce_scatter", P, V): False,
    ("all_to_all", V, V): False,
}

_EXPERT_REASON = {
    ("reinterpret", R, I): "treats a replicate value as invariant; it is the backward "
    "of convert(I,P) and has no natural forward use",
    ("reinterpret", R, V): "declares N copies of a replicated value as varying; to "
    "shard a replicated value use convert(x, {axis}, src=R, dst=V) or dst=S(i)",
    ("reinterpret", R, P): "scales the value by the axis size (each rank's copy joins "
    "the pending sum); to keep the value use convert(x, {axis}, src=R, dst=P)",
    ("convert", R, I): "drops the gradient reduction of a replicate value; it is "
    "reinterpret(R,I) and has no natural forward use",
    ("convert", I, P): "zeros every rank but rank 0; it is the backward of "
    "reinterpret(R,I)",
    ("convert", V, P): "zero-pads each rank's part into a partial sum; it is the "
    "backward of convert(R,V)",
}

# The semantics-preserving route between two types (redistribute's table, and
# what an error suggests instead of an invalid pair).
_ROUTE: dict[tuple[Kind, Kind], str] = {
    (R, I): "convert",
    (R, V): "convert",
    (R, P): "convert",
    (I, R): "convert",
    (I, V): "convert",
    (I, P): "convert",
    (V, R): "all_gather",
    (V, I): "all_gather",
    (V, V): "all_to_all",
    (V, P): "convert",
    (P, R): "all_reduce",
    (P, I): "all_reduce",
    (P, V): "reduce_scatter",
}


# Where a Partial pends avg, max or min (seed 001), only these pairs exist: a
# Replicate value is partitioned exactly by keeping it on every rank
# (convert(R, Pmax) is the identity), per-rank values are declared pending
# (reinterpret(V, Pmax)), and the collectives resolve it.  Creating one from I
# or V by zeroing ranks (the sum's gated converts) would be wrong.
_NON_SUM_PARTIAL = frozenset(
    {("all_reduce", P, R), ("all_reduce", P, I), ("reduce_scatter", P, V), ("convert", R, P), ("reinterpret", V, P)}
)


def _non_sum(axis_type: AxisType) -> bool:
    return axis_type.kind is P and axis_type.reduce != "sum"


def route(src: AxisType, dst: AxisType, axis: str = "axis") -> Step | None:
    """The semantics-preserving operation from ``src`` to ``dst`` (None: no-op).

    This is ``redistribute``'s routing table: comms where the value must move,
    ``convert`` where a local change keeps the meaning.  A pending avg/max/min
    is made only from a replicated value, and one reduction never becomes
    another in one operation: those raise ``spmd-collective`` with the two
    steps to write instead.
    """
    two_steps = _two_steps(src, dst, axis)
    if two_steps:
        raise SpmdTypeError(
            Code.COLLECTIVE,
            axis,
            f"redistribute(src={src}, dst={dst}) on axis {axis} has no single operation that keeps "
            f"the value. Fix: {two_steps}.",
        )
    if src == dst or (src.kind is dst.kind and src.kind is not V):
        return None
    if src.kind is V and dst.kind is V and (src.shard is None or dst.shard is None):
        # V and S(i) are the same local type; only S(i)->S(j) moves data.
        return None
    return Step(_ROUTE[(src.kind, dst.kind)], src, dst)


def _two_steps(src: AxisType, dst: AxisType, axis: str) -> str:
    """The two calls from ``src`` to ``dst`` where no one operation keeps the value ('' otherwise)."""
    if src.kind is P and dst.kind is P and src.reduce != dst.reduce:
        via = f"all_reduce(x, {axis}, src={src}, dst=R)"
    elif _non_sum(dst) and src.kind is not R and src.kind is not P:
        via = f"{_ROUTE[(src.kind, R)]}(x, {axis}, src={src}, dst=R)"
    else:
        return ""
    return f"{via}, then convert(x, {axis}, src=R, dst={dst})"


def _allowed_forms(op: str, src: AxisType, dst: AxisType) -> bool:
    """Shape constraints beyond the kinds: all_to_all pairs V/V or S/S."""
    if op == "all_to_all":
        return (src.shard is None) == (dst.shard is None)
    if op == "reinterpret":
        # A reinterpret never changes the local tensor, so it has no shard
        # dim to choose: a shard in or out means convert.
        return dst.shard is None
    return True


def _instead(src: AxisType, dst: AxisType, axis: str) -> str:
    if _non_sum(dst) and src.kind is V:
        return f"reinterpret(x, {axis}, src={src}, dst={dst}) to declare the per-rank values pending"
    two_steps = _two_steps(src, dst, axis)
    if two_steps:
        return two_steps
    step = route(src, dst, axis)
    if step is None and src != dst:
        # V vs S(i): the same local type, only the collective's form differs.
        shard = src.shard if src.shard is not None else dst.shard
        return (
            f"all_to_all(x, {axis}, src=S(i), dst=S(j)) with both as shards, or src=V, "
            f"dst=V (here S({shard}) and V are mixed)"
        )
    if step is None:
        return f"nothing: the input already is {dst.on(axis)}"
    expert = _TRANSITIONS.get((step.op, src.kind, dst.kind), False)
    return step.call(axis, expert=expert)


def transition(
    op: str,
    src: AxisType,
    dst: AxisType,
    axis: str,
    expert_mode: bool = False,
) -> AxisType:
    """The result type of ``op(x, axis, src=src, dst=dst)``, or why it is invalid.

    ``op`` is a collective, a cast, or ``redistribute``.  Errors:
    ``spmd-invalid-transition`` for a reinterpret/convert pair that does not
    exist, ``spmd-collective`` for a collective given a src/dst it does not
    take, ``spmd-expert-mode`` for a gated pair without ``expert_mode=True``.
    Each names the operation to call instead.
    """
    code = Code.INVALID_TRANSITION if op in CASTS else Code.COLLECTIVE
    if op == "redistribute":
        route(src, dst, axis)  # raises where no one operation keeps the value
        return dst
    if op in CASTS and src == dst:
        return dst
    # src=V means reinterpret(V,P) first (seed 000 on all_reduce).
    table_src = Partial if op in IMPLICIT_PARTIAL and src.kind is V else src
    gated = _TRANSITIONS.get((op, table_src.kind, dst.kind))
    if (_non_sum(src) or _non_sum(dst)) and (op, table_src.kind, dst.kind) not in _NON_SUM_PARTIAL:
        gated = None
    elif _non_sum(dst):
        gated = False  # keeping v on every rank partitions it exactly: nothing to gate
    if gated is None or not _allowed_forms(op, src, dst):
        raise SpmdTypeError(
            code,
            axis,
            f"{op}(src={src}, dst={dst}) does not exist on axis {axis}"
            f"{_why_not(op, src, dst)}. Fix: use {_instead(src, dst, axis)}.",
        )
    if gated and not expert_mode:
        reason = _EXPERT_REASON[(op, src.kind, dst.kind)].format(axis=axis)
        raise SpmdTypeError(
            Code.EXPERT_MODE,
            axis,
            f"{op}(src={src}, dst={dst}) on axis {axis} {reason}. If that is what you "
            f"mean, pass expert_mode=True: {Step(op, src, dst).call(axis, expert=True)}.",
        )
    return dst


def _why_not(op: str, src: AxisType, dst: AxisType) -> str:
    if _non_sum(src) or _non_sum(dst):
        pending = src if _non_sum(src) else dst
        return (
            f" (a pending {pending.reduce} is made only by convert from R or reinterpret from V, "
            f"and resolved only by all_reduce or reduce_scatter)"
        )
    if op == "reinterpret" and src.kind is P:
        return " (a pending sum can only be resolved by communication)"
    if op == "reinterpret" and (src.kind, dst.kind) == (I, P):
        return " (reinterpret(I,P) would scale the value by the axis size)"
    if op == "convert" and src.kind is P:
        return " (a pending sum can only be resolved by communication)"
    if op in CASTS and src.kind is V and dst.kind in (R, I):
        return " (the ranks hold different data: gathering it is communication)"
    if op == "all_to_all":
        return " (all_to_all maps V to V or S(i) to S(j))"
    if op in CASTS and src.kind is V and dst.kind is V:
        return " (changing the shard dim moves data between ranks)"
    if op == "reinterpret" and dst.shard is not None:
        return " (a reinterpret never moves data, so it cannot pick a shard dim)"
    return ""


def check_source(op: str, declared: AxisType, actual: AxisType, axis: str) -> None:
    """The input's actual type must be the declared ``src`` (V and S(i) agree).

    A varying input is also accepted where ``all_reduce``/``reduce_scatter``
    declare ``src=P``: the implicit ``reinterpret(V,P)`` is a valid,
    ungated transition whose forward and backward are the identity, so the
    call computes exactly what ``src=V`` would (DESIGN section 2).  This is
    the row-parallel pattern: a local matmul gives V, the reduction reads it
    as P.  Raises ``spmd-collective`` naming the operation that fits the
    actual type.
    """
    if actual.local == declared.local:
        return
    if op in IMPLICIT_PARTIAL and declared.kind is P and actual.kind is V:
        return
    raise SpmdTypeError(
        Code.COLLECTIVE,
        axis,
        f"{op} is told src={declared}, but the input is {actual.on(axis)} on axis {axis}. "
        f"Fix: pass src={actual}, or first {_instead(actual, declared, axis)}.",
    )


# Seed 000 "Comms by forwards-backwards", by (op, src kind, dst kind).  The
# backward op's src/dst are always (dual(dst), dual(src)); a test checks that.
_BACKWARD: dict[tuple[str, Kind, Kind], str] = {
    ("reinterpret", R, I): "convert",
    ("reinterpret", R, V): "reinterpret",
    ("reinterpret", R, P): "reinterpret",
    ("reinterpret", I, R): "all_reduce",
    ("reinterpret", I, V): "all_reduce",
    ("reinterpret", V, P): "reinterpret",
    ("convert", R, V): "convert",
    ("convert", R, P): "convert",
    ("convert", I, R): "all_reduce",
    ("convert", R, I): "convert",
    ("convert", I, V): "all_gather",
    ("convert", I, P): "reinterpret",
    ("convert", V, P): "convert",
    ("all_reduce", P, R): "all_reduce",
    ("all_reduce", P, I): "reinterpret",
    ("all_gather", V, R): "reduce_scatter",
    ("all_gather", V, I): "convert",
    ("reduce_scatter", P, V): "all_gather",
    ("all_to_all", V, V): "all_to_all",
}


def backward_of(op: str, src: AxisType, dst: AxisType) -> Step:
    """The operation autograd runs for ``op(src, dst)``'s gradient.

    ``src``/``dst`` must be a valid pair of :func:`transition` with the
    implicit ``reinterpret(V,P)`` of ``all_reduce``/``reduce_scatter``
    already applied.  A returned ``all_reduce(V, I)`` (the backward of
    ``reinterpret(I,V)``) means that same implicit form.

    A cast to the type it already has is its own backward.  The casts that
    make a pending avg/max/min (``convert(R, Pop)``, ``reinterpret(V, Pop)``)
    keep every rank's value, and a pending avg/max/min's gradient is already
    each rank's share of the reduced value's gradient, so their backward is a
    ``reinterpret`` (the identity).  The collectives that resolve a pending
    max/min (src ``Pmax``/``Pmin``) are not single table cells backwards: the
    runtime runs the backward of the same collective from ``P`` and splits the
    result among the ranks attaining the extremum.

    >>> str(backward_of("all_gather", Varying, Replicate))
    'reduce_scatter(P,V)'
    >>> str(backward_of("reinterpret", Invariant, Replicate))
    'all_reduce(P,I)'
    >>> str(backward_of("convert", Replicate, PartialOf("max")))
    'reinterpret(V,P)'
    """
    if op in CASTS and (src == dst or _non_sum(dst)):
        return Step("reinterpret" if _non_sum(dst) else op, dual(dst), dual(src))
    return Step(_BACKWARD[(op, src.kind, dst.kind)], dual(dst), dual(src))


def transitions() -> list[tuple[str, Kind, Kind, bool]]:
    """Every valid (op, src kind, dst kind, needs expert_mode), for docs and tests."""
    return [(op, s, d, gated) for (op, s, d), gated in _TRANSITIONS.items()]


# --------------------------------------------------------------------------
# Rules on whole statements: in-place writes, backward seeds, type asserts
# --------------------------------------------------------------------------


def check_inplace(op: str, written: AxisType, result: AxisType | None, axis: str) -> None:
    """An in-place op (or ``out=``) keeps the written tensor's type: the result must have it.

    ``result`` None (unknown on this axis) is accepted, as gradual typing asks.
    """
    if result is None or result.local == written.local:
        return
    raise SpmdTypeError(
        Code.INPLACE,
        axis,
        f"in-place {op} would change its target from {written.on(axis)} to {result.on(axis)} on "
        f"axis {axis}, but a tensor written in place keeps its type. Fix: use the out-of-place "
        f"form (y = {op.rstrip('_')}(...)) and bind the {result.on(axis)} result to a new name.",
    )


def check_write(target: AxisType, value: Operand, axis: str, index: Operand = None) -> None:
    """``x[i] = y`` (``Tensor.__setitem__``): x keeps its type, which the write must not change.

    ``target`` is x's type on ``axis``, ``value`` y's (None: unknown, accepted
    as gradual typing asks; a python scalar), ``index`` i's.  A write fits
    when x would keep its type with y's values in place: y of x's own type;
    a python scalar into anything but a pending sum (every rank's part would
    hold it; the plugin lets a literal zero through, which fits every type);
    R (or a scalar) into V, or into a pending avg/max/min (a value the same
    on every rank is its own avg, max and min).  An index that
    varies writes at different positions on each rank: only a varying x
    stays what it was.  A Partial index cannot select (as for ``x[i]``).
    """
    x, shown = target.on(axis), f"x: {target.on(axis)}"
    if isinstance(index, AxisType) and index.kind is Kind.P:
        raise SpmdTypeError(
            Code.PARTIAL_NONLINEAR,
            axis,
            f"x[i] = y uses a Partial tensor as the index on axis {axis} ({shown}, i: {index.on(axis)}); "
            f"a pending sum cannot select positions. Fix: all_reduce(i, {axis}, src={index}, dst=R) first.",
        )
    if isinstance(index, AxisType) and index.kind is Kind.V and target.local.kind is not Kind.V:
        raise SpmdTypeError(
            Code.INPLACE,
            axis,
            f"x[i] = y writes at positions that differ between ranks on axis {axis} ({shown}, i: "
            f"{index.on(axis)}), so x would no longer be {x}, but a tensor written in place keeps its "
            f"type. Fix: an index that is R on {axis} (the same positions on every rank), or write out "
            f"of place and bind the result to a new name, e.g. x2 = torch.where(mask, y, x).",
        )
    if value is None:
        return
    if isinstance(value, Scalar):
        if target.kind is not Kind.P or target.reduce != "sum":
            return
        why = "every rank's part would hold the number, so the pending sum would count it once per rank"
        fix = f"all_reduce(x, {axis}, src={target}, dst=R) before the write, and write into its R result"
        raise SpmdTypeError(Code.INPLACE, axis, _write_message(target, "a python scalar", axis, why, fix))
    if value.local == target.local:
        return
    if value.kind is Kind.R and (target.local.kind is Kind.V or (target.kind is Kind.P and target.reduce != "sum")):
        return
    y = value.on(axis)
    if value.kind is Kind.P and target.kind is not Kind.P:
        why = f"the written elements would be parts of a pending {value.reduce} among {target.kind.title} values"
        fix = f"all_reduce(y, {axis}, src={value}, dst={'I' if target.kind is Kind.I else 'R'}) first"
    elif value.local.kind is Kind.V and target.kind in (Kind.R, Kind.I):
        why = "its ranks would then hold different values"
        fix = (
            f"write a value that is {target} on {axis}, or write out of place and bind the V result to a new "
            f"name, e.g. x2 = torch.where(mask, y, x)"
        )
    elif target.kind is Kind.P and target.reduce == "sum" and value.kind is not Kind.P:
        why = "every rank's part would hold the written values, so the pending sum would add up all of them"
        first = {
            Kind.R: f"convert(y, {axis}, src=R, dst=P) (the value on one rank, zeros on the others)",
            Kind.V: f"reinterpret(y, {axis}, src=V, dst=P) if the ranks' values are the parts of the sum",
        }.get(value.kind)
        reduce_first = f"all_reduce(x, {axis}, src=P, dst=R) before the write, and write into its R result"
        fix = f"{first}, or {reduce_first}" if first else reduce_first
    else:
        why = f"x would then mix {x} and {y} elements"
        # R fits into V: a cast to R keeps the values, one to V would slice them.
        goal = Replicate if target.local.kind is Kind.V else target
        fix = f"{_instead(value, goal, axis).replace('(x, ', '(y, ')} first"
    raise SpmdTypeError(Code.INPLACE, axis, _write_message(target, f"y of type {y}", axis, why, fix))


def _write_message(target: AxisType, what: str, axis: str, why: str, fix: str) -> str:
    return (
        f"x[i] = y writes {what} into x of type {target.on(axis)} on axis {axis}, but a tensor "
        f"written in place keeps its type, and {why}. Fix: {fix}."
    )


_LOSS_FIX = {
    Kind.R: "all_gather/all_reduce with dst=I instead of dst=R before the loss, so every rank "
    "computes the same loss, or convert(loss, {axis}, src=R, dst=P)",
    Kind.V: "reinterpret(loss, {axis}, src=V, dst=P) if the global loss is the sum of the ranks' "
    "losses (typical on dp/cp), or all_reduce(loss, {axis}, src=V, dst=I)",
}


def check_loss(loss: AxisType, axis: str, call: str = "backward()") -> None:
    """Seed 000's loss rule: a backward with the implicit gradient 1.0 needs I or P on every axis.

    The seed 1.0 on each rank is the dual gradient of an I loss (I) and of a P
    loss (R); for an R or V loss it is the wrong gradient.
    """
    if loss.kind is Kind.I or loss == Partial:
        return
    if loss.kind is Kind.P:
        raise SpmdTypeError(
            Code.BACKWARD,
            axis,
            f"{call} seeds the gradient 1.0 on every rank, which is right for a pending sum but not "
            f"for the pending {loss.reduce} of the loss {loss.on(axis)} on axis {axis}. Fix: "
            f"all_reduce(loss, {axis}, src={loss}, dst=I) first.",
        )
    raise SpmdTypeError(
        Code.BACKWARD,
        axis,
        f"{call} seeds the gradient 1.0 on every rank, which is only right for an Invariant or "
        f"Partial loss, but the loss is {loss.on(axis)} on axis {axis}. Fix: "
        f"{_LOSS_FIX[loss.kind].format(axis=axis)}.",
    )


def check_asserted(actual: AxisType, asserted: AxisType, axis: str) -> None:
    """``assert_type`` may refine an unknown type but not contradict a known one (V and S(i) agree)."""
    if actual.local == asserted.local:
        return
    raise SpmdTypeError(
        Code.ASSERT,
        axis,
        f"assert_type says {asserted.on(axis)} but the value is {actual.on(axis)} on axis {axis}. "
        f"Fix: correct the assertion, or first {_instead(actual, asserted, axis)}.",
    )
