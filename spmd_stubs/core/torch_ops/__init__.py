"""Torch ops: one record per op, and the lookups by name derived from the records.

Everything the checker knows about a torch op is its
:class:`~spmd_stubs.core.torch_ops.record.Op` in :mod:`.table`: its
spellings, linearity rule (docs/spec.md#local-rules), effect on a pending
max/min (docs/spec.md#pending-reductions), shard propagation rule and
``spmd.*`` form (docs/spec.md#global-spmd).  The lookups below are built
from the records once, at import.

In-place variants (``add_``, ``__iadd__``) and ``out=`` answer to their
out-of-place op (:func:`out_of_place`).  Ops missing from the table give
unknown results (reported in strict mode).

=======================  ===================================================
module                   what
=======================  ===================================================
:mod:`.record`           the record, shape rules' parameters
:mod:`.shapes`           the shape rules
:mod:`.table`            the records
=======================  ===================================================
"""

from __future__ import annotations

from typing import Iterable

from spmd_stubs.core.torch_ops.record import (
    REQUIRED,
    NoRule,
    Op,
    Param,
    Read,
    Required,
    Rule,
    ShapeRule,
    Value,
    Variadic,
)
from spmd_stubs.core.torch_ops.table import CONSTANT_FACTORIES, RECORDS

__all__ = [
    "Op",
    "Rule",
    "Variadic",
    "ShapeRule",
    "Param",
    "Read",
    "Required",
    "REQUIRED",
    "Value",
    "NoRule",
    "RECORDS",
    "OPS",
    "TENSOR_ATTRIBUTES",
    "SPMD_OPS",
    "GRADIENT_FREE_RESULTS",
    "CONSTANT_FACTORIES",
    "BINARY_OPERATORS",
    "out_of_place",
    "lookup",
]


def _by_name(records: Iterable[Op]) -> dict[str, Op]:
    """Each spelling to its record; a spelling in two records is a mistake in the table."""
    table: dict[str, Op] = {}
    for record in records:
        for name in record.names:
            if name in table:
                raise ValueError(f"{name} has two records in spmd_stubs.core.torch_ops.table")
            table[name] = record
    return table


_ALL = _by_name(RECORDS)

OPS = {name: record for name, record in _ALL.items() if not record.attribute}
"""Method, function and operator spellings -> record."""

TENSOR_ATTRIBUTES = {name: record for name, record in _ALL.items() if record.attribute}
"""Tensor properties that are views of the tensor (``w.T``) -> record."""

SPMD_OPS = frozenset(record.spmd.op for record in RECORDS if record.spmd is not None)
"""The ``spmd.*`` ops with ``out_partial_axes`` (:mod:`spmd_stubs.ops`): every form a record names.

Each is also a torch op of the same name, whose record it follows."""

GRADIENT_FREE_RESULTS = frozenset(name for name, record in OPS.items() if not record.result_has_gradient)
"""The spellings of the ops whose result never carries a gradient (indices, bools, integers, samples,
a detached copy): docs/spec.md#operands-without-a-gradient."""

BINARY_OPERATORS = ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor")
"""Python's binary operators a tensor has, by the word of their methods: ``mul`` is ``a * b``
(``__mul__``), ``b.__rmul__(a)`` where a's own does not take b, and ``a *= b`` (``__imul__``)."""

_INPLACE_DUNDERS = {f"__i{word}__": f"__{word}__" for word in BINARY_OPERATORS}


def out_of_place(name: str) -> tuple[str, bool]:
    """``add_`` -> ``("add", True)``, ``__iadd__`` -> ``("__add__", True)``, ``add`` -> ``("add", False)``."""
    if name in _INPLACE_DUNDERS:
        return _INPLACE_DUNDERS[name], True
    if name.endswith("_") and not name.endswith("__") and name[:-1] in OPS:
        return name[:-1], True
    return name, False


def lookup(name: str) -> Op | None:
    """The record of a method, function or operator spelling (in-place ones included)."""
    return OPS.get(out_of_place(name)[0])
