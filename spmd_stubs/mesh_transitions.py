"""``reinterpret_mesh``: a value moved to another mesh over the same ranks (docs/spec.md#meshes-over-the-same-ranks).

Dense layers on ``(dp, cp, tp)`` and experts on ``(dp, ep)``, with ``ep``
bound to the ranks of ``(cp, tp)`` flattened::

    h = spmd.reinterpret_mesh(h, {(cp, tp): ep})      # V@cp, V@tp -> V@ep

Every local tensor stays where it is; the call checks, once per regrouping
and binding, that each group's flattened ranks (first axis outermost) are
the destination's, in the same order, on every rank, and raises
``ValueError`` naming both otherwise.  Its gradient passes through
unchanged: the reverse regrouping, which moves no data either.  The type
rule (:func:`spmd_stubs.core.mesh_transitions.regroup`) is the checker's.
"""

from __future__ import annotations

from typing import Mapping

import torch

from spmd_stubs.core.mesh_transitions import Regrouping, check_regrouping, written
from spmd_stubs.mesh import AxisLike, _flattened_ranks, _names, binding_cache

__all__ = ["reinterpret_mesh"]

_checked: dict[Regrouping, None] = binding_cache()
"""Regroupings whose ranks were compared under the current bindings."""


def reinterpret_mesh(x: torch.Tensor, groups: Mapping[AxisLike, AxisLike]) -> torch.Tensor:
    """``x`` on the destination axes of ``groups`` (``{(cp, tp): ep}``): the same local tensor, an alias.

    Every rank of the groups calls it together the first time (the ranks of a
    flattened group are gathered then).
    """
    regrouping = tuple((_names(source), _names(destination)) for source, destination in groups.items())
    if regrouping not in _checked:
        check_regrouping(regrouping)
        for source, destination in regrouping:
            _check_same_ranks(source, destination)
        _checked[regrouping] = None
    return x.view_as(x)


def _check_same_ranks(source: tuple[str, ...], destination: tuple[str, ...]) -> None:
    before, after = _flattened_ranks(source), _flattened_ranks(destination)
    if before != after:
        raise ValueError(
            f"reinterpret_mesh moves {written(source)} to {written(destination)}, but on this rank "
            f"{written(source)} flattens to ranks {before} and {written(destination)} to ranks {after}. "
            f"Fix: bind {written(destination)} to the same ranks in the same order (first axis outermost), "
            f"or name the groups that are")
