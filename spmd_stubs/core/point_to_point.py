"""Point-to-point on a mesh axis: the type of a ring step (docs/spec.md#ring-steps).

``ring_shift(x, a, offset=k)`` moves each rank's block ``k`` ranks ahead on
``a``.  A permutation of the ranks' blocks keeps every type that does not
depend on which rank holds which block: ``R`` and ``I`` (the same block on
every rank), ``P`` (a sum, a mean, a max or a min of the parts does not
depend on their order) and ``V``.  A shard is a ``V`` whose global meaning is
its parts in rank order, which the step rotates: it becomes ``V``.  The
backward shifts the gradient by ``-k``, the same permutation reversed, and
the same rule types it (the dual of a kind above is again such a kind).
"""

from __future__ import annotations

from spmd_stubs.core.axis_types import AxisType, Varying


def ring_shifted(x: AxisType) -> AxisType:
    """``x``'s type on the axis after a ring step on it.

    >>> from spmd_stubs.core import Partial, Shard
    >>> str(ring_shifted(Partial)), str(ring_shifted(Shard(0)))
    ('P', 'V')
    """
    return Varying if x.shard is not None else x
