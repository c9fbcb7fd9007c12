"""DTensor's ``local_map`` regions as SPMD types on one mesh axis (docs/spec.md#dtensors-local_map).

``local_map(func, out_placements, in_placements, in_grad_placements, mesh)``
runs ``func`` on local tensors: each DTensor argument enters through
``to_local(grad_placements=...)`` and each tensor result leaves through
``DTensor.from_local(out, mesh, placement)`` (``torch/distributed/tensor/
experimental/_func_map.py``).  On one mesh dim, a placement and the placement
the region's gradient is read as together give the local tensor's type, since
our type fixes both the data on the ranks and its gradient (spec.md#types):

==================  ====================  =====  ==========================================
forward placement   gradient placement    type   the body's gradient on each rank must be
==================  ====================  =====  ==========================================
``Replicate()``     ``Replicate()``       ``I``  the whole gradient, identical everywhere
``Replicate()``     ``Partial()``         ``R``  this rank's contribution to a sum
``Shard(d)``        ``Shard(d)``          ``S(d)`` this rank's piece
``Partial()``       ``Replicate()``       ``P``  the gradient of the sum, identical everywhere
==================  ====================  =====  ==========================================

A gradient placement left out is DTensor's default: the forward placement,
``Partial()`` read as ``Replicate()`` (``_normalize_placements_for_grad``).
Any other pair has no type: the gradient DTensor assumes is none a body can
give (a ``Partial()`` value whose gradient is read as a sum of contributions
is counted once per rank).  A result leaves through ``from_local`` with the
default gradient, so ``Replicate()`` is ``I``, ``Shard(d)`` ``S(d)`` and
``Partial()`` ``P``.  tests/runtime/test_dtensor_local_map_gloo.py runs each
row on two ranks against one process.
"""

from __future__ import annotations

from spmd_stubs.core.axis_types import AxisType, Invariant, Partial, Replicate, Shard
from spmd_stubs.core.parallel_styles import REPLICATE, Placement

PARTIAL = Placement("Partial")


def default_gradient(forward: Placement) -> Placement:
    """The gradient placement DTensor assumes where none is given: the forward one, a partial read whole."""
    return REPLICATE if forward.kind == "Partial" else forward


def region_input_type(forward: Placement, gradient: Placement | None) -> AxisType | None:
    """The type of a region's local input with placement ``forward`` whose gradient is read as ``gradient``
    (None: left out, DTensor's default); None where the pair is no type of ours."""
    read_as = default_gradient(forward) if gradient is None else gradient
    if forward.kind == "Replicate":
        return {"Replicate": Invariant, "Partial": Replicate}.get(read_as.kind)
    if forward.kind == "Shard":
        assert forward.dim is not None
        return Shard(forward.dim) if read_as == forward else None
    return Partial if read_as == REPLICATE else None


def typed_gradients(forward: Placement) -> tuple[Placement, ...]:
    """The gradient placements that give an input of placement ``forward`` a type (a fix names one)."""
    if forward.kind == "Replicate":
        return (REPLICATE, PARTIAL)
    return (default_gradient(forward),)


def region_output_type(placement: Placement) -> AxisType:
    """The type a region's local result must have to leave with ``placement`` (``from_local``'s default
    gradient: the whole gradient reaches a ``Replicate()`` or ``Partial()`` result on every rank)."""
    if placement.kind == "Shard":
        assert placement.dim is not None
        return Shard(placement.dim)
    return Invariant if placement.kind == "Replicate" else Partial
