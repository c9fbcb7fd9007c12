"""Shape rules: how an op treats tensor dims, built from the dims a call passes (docs/spec.md#global-spmd).

Each rule names the parameters it reads (a factory takes the names an op
spells them with) and builds one :mod:`~spmd_stubs.core.sharding` behaviour
from their values.  A value the behaviour cannot take raises
:class:`~spmd_stubs.core.torch_ops.record.NoRule`: that call has no rule.
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

from spmd_stubs.core import sharding
from spmd_stubs.core.torch_ops.record import REQUIRED, NoRule, Op, Param, Read, Required, ShapeRule, Value


def _int(value: Value) -> int:
    if isinstance(value, int):  # True and False are 1 and 0, as torch reads them
        return int(value)
    raise NoRule("a dim that is not an int")


def _dims(value: Value) -> tuple[int, ...] | None:
    """One dim or several (None: every dim)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise NoRule("a bool where dims were expected")
    if value == ():
        raise NoRule("an empty dim list")
    if isinstance(value, int):
        return (value,)
    if isinstance(value, tuple):
        return value
    raise NoRule("dims that are not ints")


def constant(behaviour: Callable[[], sharding.Behaviour]) -> ShapeRule:
    """A rule that reads no dims from the call: ``behaviour()``, built on the first call and kept.

    A factory, not the behaviour itself: building the table leaves shard
    propagation unimported (:mod:`~spmd_stubs.core.sharding` loads a name on first use).
    """
    built = functools.cache(behaviour)
    return ShapeRule(lambda values, op: built())


POINTWISE = constant(lambda: sharding.Pointwise())
ATTENTION = constant(lambda: sharding.Attention())
ALONG_LAST_TWO = constant(lambda: sharding.Along((-2, -1)))
MATRIX_TRANSPOSE = constant(lambda: sharding.Transpose(0, 1, matrix=True))
LAST_TWO_TRANSPOSE = constant(lambda: sharding.Transpose(-2, -1))


def _matmul(values: Sequence[Value], op: Op) -> sharding.Behaviour:
    return sharding.Matmul(None, op.spmd)


MATMUL = ShapeRule(_matmul)
RMATMUL = ShapeRule(_matmul, swap=True)
"""``a.__rmatmul__(b)``: ``b @ a``, its operands bound in reverse."""


def matmul_of(equation: str) -> ShapeRule:
    """A matmul of fixed ranks, as its einsum equation (``mm``: ``ij,jk->ik``)."""
    return ShapeRule(lambda values, op: sharding.Matmul((equation,), op.spmd))


def _einsum(values: Sequence[Value], op: Op) -> sharding.Behaviour:
    (equation,) = values
    assert isinstance(equation, str), "Read.EQUATION gives a string"
    return sharding.Einsum(equation, op.spmd)


EINSUM = ShapeRule(_einsum, (Param("equation", read=Read.EQUATION),))
LINEAR = ShapeRule(lambda values, op: sharding.Linear(op.spmd))


def _reduce(values: Sequence[Value], op: Op) -> sharding.Behaviour:
    dim, keepdim = values
    return sharding.Reduce(_dims(dim), bool(keepdim), op.partial, op.spmd)


def reduce(dim: Value | Required = None) -> ShapeRule:
    """A reduction over ``dim`` (None: every dim), ``keepdim`` as the call says (False where the op has none)."""
    return ShapeRule(_reduce, (Param("dim", dim), Param("keepdim", False)))


def _reduce_or_pointwise(values: Sequence[Value], op: Op) -> sharding.Behaviour:
    *reduction, other = values
    return sharding.Pointwise() if other else _reduce(reduction, op)


REDUCE_OR_POINTWISE = ShapeRule(
    _reduce_or_pointwise, (Param("dim", None), Param("keepdim", False), Param("other", None, Read.GIVEN))
)
"""``max`` / ``min``: a reduction, or elementwise where the call passes ``other``."""


def _along(values: Sequence[Value], op: Op) -> sharding.Behaviour:
    (dim,) = values
    dims = _dims(dim)
    if dims is None:
        raise NoRule("dim=None")
    return sharding.Along(dims)


def along(default: Value | Required = REQUIRED, name: str = "dim") -> ShapeRule:
    """Computing along the dims the parameter ``name`` gives (softmax, cumsum, sort; ``flip``'s ``dims``)."""
    return ShapeRule(_along, (Param(name, default),))


def _along_trailing(values: Sequence[Value], op: Op) -> sharding.Behaviour:
    (normalized_shape,) = values
    if isinstance(normalized_shape, int):
        return sharding.Along((-1,))
    if isinstance(normalized_shape, tuple):
        return sharding.Along(tuple(range(-len(normalized_shape), 0)))
    raise NoRule("a normalized_shape that is not a shape")


ALONG_TRAILING = ShapeRule(_along_trailing, (Param("normalized_shape"),))
"""``layer_norm`` / ``rms_norm``: along the trailing dims ``normalized_shape`` covers."""


def _transpose(values: Sequence[Value], op: Op) -> sharding.Behaviour:
    first, second = values
    return sharding.Transpose(_int(first), _int(second))


def transpose(first: str, second: str) -> ShapeRule:
    """Swapping the two dims the parameters ``first`` and ``second`` give (``swapaxes``: ``axis0``, ``axis1``)."""
    return ShapeRule(_transpose, (Param(first), Param(second)))


def _movedim(values: Sequence[Value], op: Op) -> sharding.Behaviour:
    source, destination = values
    return sharding.Movedim(_dims(source) or (), _dims(destination) or ())


def _flatten(values: Sequence[Value], op: Op) -> sharding.Behaviour:
    start, end = values
    return sharding.Flatten(_int(start), _int(end))


PERMUTE = ShapeRule(lambda values, op: sharding.Permute(_dims(values[0]) or ()), (Param("dims"),))
MOVEDIM = ShapeRule(_movedim, (Param("source"), Param("destination")))
UNSQUEEZE = ShapeRule(lambda values, op: sharding.Unsqueeze(_int(values[0])), (Param("dim"),))
SQUEEZE = ShapeRule(lambda values, op: sharding.Squeeze(_dims(values[0])), (Param("dim", None),))
FLATTEN = ShapeRule(_flatten, (Param("start_dim", 0), Param("end_dim", -1)))
STACK = ShapeRule(lambda values, op: sharding.Stack(_int(values[0])), (Param("dim", 0),))


def cat(name: str = "dim") -> ShapeRule:
    """Joining along the dim the parameter ``name`` gives (``concatenate`` calls it ``axis``)."""
    return ShapeRule(lambda values, op: sharding.Concat(_int(values[0])), (Param(name, 0),))


def _view(values: Sequence[Value], op: Op) -> sharding.Behaviour:
    (shape,) = values
    assert isinstance(shape, sharding.View), "Read.NEW_SHAPE gives a sharding.View"
    return shape


def new_shape(name: str) -> ShapeRule:
    """``view`` / ``reshape`` to the shape the parameter ``name`` gives."""
    return ShapeRule(_view, (Param(name, read=Read.NEW_SHAPE),))
