"""The op record: everything the checker knows about one torch op, in one place.

An :class:`Op` gathers an op's spellings, its linearity rule
(docs/spec.md#local-rules), its effect on a pending max/min
(docs/spec.md#pending-reductions), its shape rule for shard propagation, its
``spmd.*`` form (docs/spec.md#global-spmd), which operand it adds as a
bias, and which of its operands, and whether its result, carry a gradient
(docs/spec.md#operands-without-a-gradient).  A shape rule names the
parameters that give the op's dims (:class:`Param`); the plugin reads their
values from each call and the rule builds the
:mod:`~spmd_stubs.core.sharding` behaviour from them.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence, Union

from spmd_stubs.core.rules import Apply, Arg, Effect, Expr, Linearity

if TYPE_CHECKING:  # only named here: the records are built without importing shard propagation
    from spmd_stubs.core.sharding import Behaviour, SpmdForm, View


@dataclass(frozen=True)
class Variadic:
    """``linearity`` over every tensor operand from parameter ``start`` on.

    Arguments that are never tensors (python numbers, strings, index lists)
    are the op's parameters, not operands: ``einsum``'s equation, ``cat``'s
    and ``softmax``'s ``dim``.  They are left out of the judgement (a ``dim``
    is no term of ``cat``'s sum) and of the messages.
    """

    linearity: Linearity
    start: int = 0


Rule = Union[Expr, Variadic]


class Read(enum.Enum):
    """How the plugin reads a shape parameter's value from a call."""

    LITERAL = "literal"
    """An int, a tuple of ints, True, False or None, written in the call."""
    GIVEN = "given"
    """Whether the call passes the parameter at all (``max(x, other)`` is elementwise)."""
    EQUATION = "equation"
    """The call's first argument, a string literal (``einsum``'s equation, whatever its parameter's name)."""
    NEW_SHAPE = "new shape"
    """A new shape, as the input dims it provably keeps (:class:`~spmd_stubs.core.sharding.View`)."""


class Required(enum.Enum):
    """The type of :data:`REQUIRED`."""

    REQUIRED = "required"


REQUIRED = Required.REQUIRED
"""A shape parameter without a default: a call that does not pass it statically has no rule."""

Value = Union[None, bool, int, tuple[int, ...], str, "View"]
"""A shape parameter's value as read from a call (the kinds :class:`Read` produces)."""


@dataclass(frozen=True)
class Param:
    """A parameter of the op that gives its dims: its name in the call, its default, how it is read."""

    name: str
    default: Value | Required = REQUIRED
    read: Read = Read.LITERAL


class NoRule(Exception):
    """The call's dims are not static: the op has no shard propagation rule for this call."""


@dataclass(frozen=True)
class ShapeRule:
    """How an op treats tensor dims, for shard propagation.

    ``params`` are read from each call, in order, and ``build`` makes the
    behaviour from their values and the op's record (raising :class:`NoRule`
    where the values give none).  ``swap``: the call binds the behaviour's
    first two operands in reverse (``a.__rmatmul__(b)`` is ``b @ a``).
    """

    build: Callable[[Sequence[Value], Op], Behaviour]
    params: tuple[Param, ...] = ()
    swap: bool = False


@dataclass(frozen=True)
class Op:
    """One torch op: every fact the checker uses about it."""

    names: tuple[str, ...]
    """Its method, function and operator spellings (in-place ones, ``add_`` and ``__iadd__``, answer to these)."""
    linearity: Rule
    """Its rule on the operands that carry a gradient: an expression over operand numbers, or :class:`Variadic`."""
    effect: Effect = None
    """What it does to a pending max/min; only ops with one may keep a ``Pmax``/``Pmin`` operand."""
    shape: ShapeRule | None = None
    """Its shard propagation rule (None: a sharded operand is an error in global SPMD)."""
    partial: str | None = None
    """The pending reduction a sharded contracted or reduced dim leaves where the call names the axis in
    ``out_partial_axes`` (None: the op cannot leave one)."""
    spmd: SpmdForm | None = None
    """The ``spmd.*`` op that does it with ``out_partial_axes``: what fixes for a sharded contraction name."""
    bias: int | None = None
    """The operand it adds to a product (``linear``'s ``bias``, ``addmm``'s ``input``): where the product is a
    rank's part of a sum, the bias goes after the reduction (the fixes say so, and ``spmd.linear`` with
    ``out_partial_axes`` refuses a bias on every rank)."""
    no_grad: tuple[int, ...] = ()
    """Operands that never carry a gradient (indices, masks, conditions): each selects from the rest
    (:attr:`~spmd_stubs.core.Linearity.SELECT`)."""
    result_has_gradient: bool = True
    """False where the result never carries a gradient: it holds indices, bools, integers or samples, or is
    detached from the graph (docs/spec.md#operands-without-a-gradient)."""
    attribute: bool = False
    """A tensor property (``w.T``), not a call."""

    def __post_init__(self) -> None:
        if self.no_grad and isinstance(self.linearity, Variadic):
            raise TypeError(f"{self.names[0]}: a variadic op's operands have no fixed positions to select with")

    @functools.cached_property
    def rule(self) -> Rule:
        """The op's rule over all its operands: each no-gradient operand selects from the rest."""
        if isinstance(self.linearity, Variadic):
            return self.linearity
        rule: Expr = self.linearity
        for index in reversed(self.no_grad):
            rule = Apply(Linearity.SELECT, Arg(index), rule)
        return rule
