"""Inside an autograd Function's ``forward`` or ``backward``: forward values only (docs/spec.md#function-bodies).

autograd records nothing in these bodies, so two types that differ only
in the gradient they promise hold the same data there, and a value the
body returns is its declared type wherever a reinterpretation without
communication relates the two:

=========  ============================================================
returned   may be declared
=========  ============================================================
R or I     R, I, V or S(i) (a rank's slice by a python index is not seen)
V, S(i)    V or S(i) (as at every boundary: a shard's dim is its layout), or P
P          only P (with its own reduction)
=========  ============================================================

R declared P is the exception among the reinterpretations: every rank's
copy would count once in the sum.

>>> from spmd_stubs.core.axis_types import Invariant, Partial, Replicate, Shard, Varying
>>> returns_as(Replicate, Invariant), returns_as(Invariant, Shard(-1)), returns_as(Varying, Partial)
(True, True, True)
>>> returns_as(Partial, Invariant), returns_as(Varying, Replicate), returns_as(Replicate, Partial)
(False, False, False)
"""

from __future__ import annotations

from spmd_stubs.core.axis_types import AxisType, Kind

_REPLICATED = (Kind.R, Kind.I)


def returns_as(found: AxisType, declared: AxisType) -> bool:
    """Whether a Function body may return a ``found`` value (on one axis) where it declares ``declared``."""
    found, declared = found.local, declared.local
    if found == declared:
        return True
    if found.kind in _REPLICATED:
        return declared.kind is not Kind.P
    return found.kind is Kind.V and declared.kind is Kind.P
