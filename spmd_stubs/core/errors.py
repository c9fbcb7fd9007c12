"""Rule violations: one error code per rule, one exception for plugin and runtime.

The plugin turns a :class:`SpmdTypeError` into a static diagnostic, the
runtime shim raises it as a ``ValueError``: both speak with the same words.
"""

from __future__ import annotations

import enum


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


