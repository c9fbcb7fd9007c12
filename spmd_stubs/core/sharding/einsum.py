"""Einsum and the matmul family: the einsum rule of shard propagation (docs/spec.md#global-spmd).

A label sharded on the axis must be sharded the same way in every operand
that uses it.  A label the output keeps gives the result's shard; a
contracted one leaves a pending sum where the call names the axis in
``out_partial_axes`` and is an error otherwise.  Readings where the local
program would fail torch's shape check (a contracted or matched dim split on
one operand and whole on another) are dropped as *loud*: they cannot run
silently.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Callable, Sequence

from spmd_stubs.core.axis_types import AxisType, Operand, Scalar
from spmd_stubs.core.sharding.errors import (
    Loud,
    SpmdForm,
    contraction,
    first_shard,
    gather_fix,
    mismatch,
    needless_partial,
)
from spmd_stubs.core.sharding.readings import Invalid, Outcome, Pos, agree, ambiguity, normal, readings_bound
from spmd_stubs.core.sharding.specs import shown

MATMUL_FORMS = ("...ij,...jk->...ik", "...ij,j->...i", "j,...jk->...k", "j,j->")
_LINEAR_FORMS = ("...i,oi,o->...o", "...i,i,->...")
_LINEAR_NO_BIAS_FORMS = ("...i,oi->...o", "...i,i->...")


@dataclass(frozen=True)
class Einsum:
    """``torch.einsum(equation, *operands)``: the einsum rule.

    ``spmd``: the ``spmd.*`` form a fix names (None: ``spmd.einsum``).
    """

    equation: str
    spmd: SpmdForm | None = None

    def rule(self, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
        tensors = [o for o in operands if not isinstance(o, Scalar)]
        try:
            _parse_equation(self.equation, len(tensors))
        except ValueError as why:
            raise mismatch(
                op,
                axis,
                operands,
                f"the checker cannot read the einsum equation {self.equation!r} ({why}), so it cannot follow the split",
                "write the equation as a string literal with one term per operand (letters and '...'), "
                f"or {gather_fix(axis, first_shard(operands))}",
            ) from None
        return _einsum_rule((self.equation,), _Call(tensors, axis, op, partial, "sum", self.spmd))


@dataclass(frozen=True)
class Matmul:
    """``a @ b`` / ``torch.matmul`` (1-D operands included), or a fixed form.

    ``equations`` None: every form ``matmul`` takes, by the operands' ndims
    (the readings); otherwise the einsum equations of the op (``mm``:
    ``ij,jk->ik``).  ``spmd``: the ``spmd.*`` form a fix names (None:
    ``spmd.einsum``).
    """

    equations: tuple[str, ...] | None = None
    spmd: SpmdForm | None = None

    def rule(self, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
        return _einsum_rule(self.equations or MATMUL_FORMS, _Call(list(operands[:2]), axis, op, partial, "sum", self.spmd))


@dataclass(frozen=True)
class Linear:
    """``F.linear(x, weight, bias)`` = ``x @ weight.T + bias`` (weight 2-D, or 1-D).

    ``spmd``: the ``spmd.*`` form a fix names (None: ``spmd.einsum``).
    """

    spmd: SpmdForm | None = None

    def rule(self, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
        x, w, bias = (list(operands) + [None, None, None])[:3]
        if bias is None or isinstance(bias, Scalar):
            return _einsum_rule(_LINEAR_NO_BIAS_FORMS, _Call([x, w], axis, op, partial, "sum", self.spmd))
        return _einsum_rule(_LINEAR_FORMS, _Call([x, w, bias], axis, op, partial, "sum", self.spmd))


@dataclass(frozen=True)
class Attention:
    """``scaled_dot_product_attention(q, k, v, attn_mask)``: ``...le,...se,...sv(,...ls)->...lv``.

    Softmax runs over the key dim ``s``: no contracted dim may be split.
    """

    def rule(self, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
        q, k, v, mask = (list(operands) + [None] * 4)[:4]
        if isinstance(mask, AxisType):
            return _einsum_rule(("...le,...se,...sv,...ls->...lv",), _Call([q, k, v, mask], axis, op, partial, None, None))
        return _einsum_rule(("...le,...se,...sv->...lv",), _Call([q, k, v], axis, op, partial, None, None))


@dataclass(frozen=True)
class _Call:
    """A contraction's call on one axis, as every reading of it sees it.

    ``allowed``: the pending reduction a sharded contracted dim may leave
    (None: none, attention's softmax); ``spmd``: the form the fix names.
    """

    operands: Sequence[Operand]
    axis: str
    op: str
    partial: str | None
    allowed: str | None
    spmd: SpmdForm | None

    def loud(self, why: str, fix: str) -> Loud:
        return Loud(mismatch(self.op, self.axis, self.operands, why, fix))


_LABEL = re.compile(r"\.\.\.|[A-Za-z]")


@dataclass(frozen=True)
class _Term:
    labels: tuple[str, ...]
    """The labels in order; ``"..."`` once at most."""

    @property
    def ellipsis(self) -> bool:
        return "..." in self.labels

    def expanded(self, length: int, out_length: int) -> list[str]:
        """The labels with the ellipsis as ``length`` broadcast labels, right-aligned to ``out_length``."""
        result: list[str] = []
        for label in self.labels:
            if label == "...":
                result.extend(f"...{out_length - length + k}" for k in range(length))
            else:
                result.append(label)
        return result


def _parse_equation(equation: str, count: int) -> tuple[list[_Term], _Term]:
    text = equation.replace(" ", "")
    left, arrow, right = text.partition("->")
    terms = [_Term(tuple(_LABEL.findall(part))) for part in left.split(",")]
    for part, term in zip(left.split(","), terms):
        if "".join(term.labels) != part or term.labels.count("...") > 1:
            raise ValueError(f"cannot read the einsum term {part!r}")
    if len(terms) != count:
        raise ValueError(f"the equation {equation!r} has {len(terms)} operands, the call {count}")
    if arrow:
        out = _Term(tuple(_LABEL.findall(right)))
        if "".join(out.labels) != right:
            raise ValueError(f"cannot read the einsum output {right!r}")
    else:
        labels = [label for term in terms for label in term.labels if label != "..."]
        once = sorted(label for label in set(labels) if labels.count(label) == 1)
        ellipsis = ("...",) if any(t.ellipsis for t in terms) else ()
        out = _Term((*ellipsis, *once))
    return terms, out


def _einsum_rule(equations: Sequence[str], call: _Call) -> AxisType:
    """Every reading of every equation (each ellipsis of every length) must agree."""
    readings: list[Callable[[], Outcome]] = []
    bound = readings_bound(*(o.shard for o in call.operands if isinstance(o, AxisType) and o.shard is not None))
    for equation in equations:
        terms, out = _parse_equation(equation, len(call.operands))
        choices = [range(bound) if term.ellipsis else range(1) for term in terms]
        for lengths in itertools.product(*choices):

            def outcome(terms: list[_Term] = terms, out: _Term = out, lengths: tuple[int, ...] = lengths) -> Outcome:
                return _einsum_reading(terms, out, lengths, call)

            readings.append(outcome)
    shard = first_shard(call.operands)
    return agree(readings, ambiguity(call.op, call.axis, call.operands, f"the shard dim {shard.shard}"))


def _einsum_reading(terms: Sequence[_Term], out: _Term, lengths: Sequence[int], call: _Call) -> Outcome:
    """The einsum rule for one reading (the ellipsis lengths fixed)."""
    out_length = max([length for term, length in zip(terms, lengths) if term.ellipsis], default=0)
    expanded = [term.expanded(length, out_length) for term, length in zip(terms, lengths)]
    out_labels = out.expanded(out_length, out_length)
    labelled = _labelled(terms, expanded, lengths, out_length, call.operands)
    label, first = _shared_label(labelled, call)
    _check_whole_operands(label, first, expanded, {index for index, _, _ in labelled}, call)
    if label in out_labels:
        if call.partial is not None:
            raise needless_partial(call.op, call.axis, call.operands)
        shard = first.shard
        assert shard is not None
        return Pos(out_labels.index(label), len(out_labels), first.order, shard)
    return contraction(call.op, call.axis, call.operands, call.partial, "contracts over", call.allowed, call.spmd)


def _labelled(
    terms: Sequence[_Term],
    expanded: Sequence[list[str]],
    lengths: Sequence[int],
    out_length: int,
    operands: Sequence[Operand],
) -> list[tuple[int, str, AxisType]]:
    """Each sharded operand with the label of its sharded dim (raises :class:`Invalid`: no such reading)."""
    labelled: list[tuple[int, str, AxisType]] = []
    for index, (labels, operand) in enumerate(zip(expanded, operands)):
        if isinstance(operand, AxisType) and operand.shard is not None:
            position = normal(operand.shard, len(labels))
            if position is None:
                raise Invalid(index)
            if terms[index].ellipsis and lengths[index] != out_length:
                raise Invalid(index)  # a sharded operand is assumed to have the result's batch dims
            labelled.append((index, labels[position], operand))
    return labelled


def _shared_label(labelled: Sequence[tuple[int, str, AxisType]], call: _Call) -> tuple[str, AxisType]:
    """The one label the axis splits, and its first split operand: operands must split it alike."""
    names = sorted({label for _, label, _ in labelled})
    if len(names) > 1:
        raise call.loud(
            f"the axis splits different dims of the operands ({', '.join(_label_text(n) for n in names)}), "
            "so the result would be split twice on it, or mixed",
            f"all_to_all(y, {call.axis}, src=..., dst=...) so the operands split the same dim, or "
            f"{gather_fix(call.axis, labelled[-1][2], 'one operand')}",
        )
    first = labelled[0][2]
    if any(other.order != first.order for _, _, other in labelled[1:]):
        raise call.loud(
            "the operands split the shared dim over the axes in a different order",
            "redistribute one operand to the other's partition spec",
        )
    return names[0], first


def _check_whole_operands(
    label: str, first: AxisType, expanded: Sequence[list[str]], split: set[int], call: _Call
) -> None:
    """An operand that has the split dim whole has another local size: torch rejects the reading."""
    for index, labels in enumerate(expanded):
        if label in labels and index not in split and not label.startswith("..."):
            operand = call.operands[index]
            raise call.loud(
                f"dim {_label_text(label)} is split on one operand and whole on another "
                f"({shown([operand], call.axis) or 'unknown'}), so the local sizes differ",
                f"convert(w, {call.axis}, src={operand.kind.value if isinstance(operand, AxisType) else 'R'}, "
                f"dst={first}) on the whole operand (if it is replicated), or "
                f"{gather_fix(call.axis, first, 'the split one')}",
            )


def _label_text(label: str) -> str:
    return "a batch dim" if label.startswith("...") else repr(label)

