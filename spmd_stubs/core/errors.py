"""Rule violations: one error code per rule, one exception for plugin and runtime.

The plugin turns a :class:`SpmdTypeError` into a static diagnostic, the
runtime shim raises it as a ``ValueError``: both speak with the same words.
A violation whose fix needs no choice by the user also carries it as a
:class:`Fix`, which tools apply without reading the message.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from spmd_stubs.core.axis_types import AxisType


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
    MESH = "spmd-mesh"


class Target(str, enum.Enum):
    """What a :class:`Fix` rewrites."""

    OPERAND = "operand"
    """One operand of the failing op, or the loss of ``backward()``: the first one whose type on
    the axis is the fix's ``operand``."""
    CALL = "call"
    """The failing collective or cast call itself; ``{x}`` stands for its tensor input."""


@dataclass(frozen=True)
class Fix:
    """The rewrite that makes a rule hold, where it needs no choice: ``template`` in place of the
    target, with ``{x}`` standing for the target's source (``{x}`` alone drops a call).

    The call in ``template`` keeps the value's meaning, so the fixed program
    computes what the original meant (docs/spec.md#fixes).

    >>> Fix(Target.CALL, "all_reduce({x}, tp, src=P, dst=R)").applied_to("h @ w")
    'all_reduce(h @ w, tp, src=P, dst=R)'
    """

    target: Target
    template: str
    operand: Optional["AxisType"] = None

    def applied_to(self, source: str) -> str:
        return self.template.format(x=source)


CHOICE = "Fix (needs your choice): "


def plainly_a_choice(message: str) -> str:
    """``message`` saying that its fix needs a choice (a message with no rewrite to apply).

    >>> plainly_a_choice("x is wrong. Fix: name each mesh axis once.")
    'x is wrong. Fix (needs your choice): name each mesh axis once.'
    """
    return message.replace("Fix: ", CHOICE, 1)


class SpmdTypeError(ValueError):
    """A rule violation: ``code`` names the rule, ``axis`` the mesh axis.

    ``str(err)`` is the full message, ending with the concrete fix; ``fix``
    is that fix as a rewrite, None where it needs a choice by the user.
    """

    malformed = False
    """Whether the error is about malformed input (its fix is to write it right, not a choice)."""

    def __init__(self, code: Code, axis: str, message: str, fix: Fix | None = None) -> None:
        if fix is None and not self.malformed and code is not Code.ANNOTATION:
            # An annotation error names what is malformed; any other fix without a rewrite is a choice.
            message = plainly_a_choice(message)
        super().__init__(message)
        self.code = code
        self.axis = axis
        self.message = message
        self.fix = fix
