"""Where a typed value flows into a place that forgets its SPMD type: ``spmd-untyped-boundary`` (strict).

Every such place is one of :class:`Boundary`'s kinds, and every message
names it in the same words (``Boundary.phrase``), so a tool reading mypy's
report (the coverage report) can tell the kinds apart by :func:`kind_of`.
"""

from __future__ import annotations

from enum import Enum


class Boundary(Enum):
    """A kind of place where a typed value's SPMD type is lost, and the words a message names it with."""

    UNANNOTATED_PARAMETER = "unannotated parameter"
    PLAIN_PARAMETER = "parameter typed plain torch.Tensor"
    UNANNOTATED_RESULT = "unannotated result"
    PLAIN_RESULT = "result typed plain torch.Tensor"
    THIRD_PARTY = "untyped third-party call"
    UNANNOTATED_MODULE = "module with an unannotated forward"
    PLAIN_RETURN = "return typed plain torch.Tensor"

    @property
    def phrase(self) -> str:
        return f"lost at an {self.value}" if self.value[0] in "aeiou" else f"lost at a {self.value}"


def kind_of(message: str) -> Boundary | None:
    """The kind of boundary an ``spmd-untyped-boundary`` message reports."""
    return next((kind for kind in Boundary if kind.phrase in message), None)
