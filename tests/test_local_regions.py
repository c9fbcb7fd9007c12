"""DTensor ``local_map`` regions as SPMD types (spmd_stubs.core.local_regions), pure and fast.

Each pair is read off ``to_local(grad_placements=...)`` and ``from_local``'s default gradient
(docs/spec.md#dtensors-local_map); tests/runtime/test_dtensor_local_map_gloo.py checks the gradients on
two ranks.
"""

from __future__ import annotations

import pytest

from spmd_stubs.core import Invariant, Partial, Replicate, Shard
from spmd_stubs.core.local_regions import (
    PARTIAL,
    default_gradient,
    region_input_type,
    region_output_type,
    typed_gradients,
)
from spmd_stubs.core.parallel_styles import REPLICATE, Placement, shard


def test_a_replicate_input_is_i_by_default_and_r_with_a_partial_gradient() -> None:
    assert region_input_type(REPLICATE, None) == Invariant
    assert region_input_type(REPLICATE, REPLICATE) == Invariant
    assert region_input_type(REPLICATE, PARTIAL) == Replicate


def test_a_shard_input_keeps_its_dim_only_with_its_own_gradient() -> None:
    assert region_input_type(shard(1), None) == Shard(1)
    assert region_input_type(shard(-1), shard(-1)) == Shard(-1)
    assert region_input_type(shard(1), shard(0)) is None


def test_a_partial_input_is_p_with_its_gradient_read_whole() -> None:
    assert default_gradient(PARTIAL) == REPLICATE
    assert region_input_type(PARTIAL, None) == Partial
    assert region_input_type(PARTIAL, REPLICATE) == Partial


@pytest.mark.parametrize(("forward", "gradient"), [
    (PARTIAL, PARTIAL), (REPLICATE, shard(0)), (shard(0), REPLICATE), (shard(0), PARTIAL)])
def test_a_gradient_no_body_can_give_has_no_type(forward: Placement, gradient: Placement) -> None:
    assert region_input_type(forward, gradient) is None


def test_each_typed_gradient_gives_a_type_and_the_default_is_among_them() -> None:
    for forward in (REPLICATE, PARTIAL, shard(0), shard(-1)):
        gradients = typed_gradients(forward)
        assert default_gradient(forward) in gradients
        assert all(region_input_type(forward, gradient) is not None for gradient in gradients)


def test_results_leave_with_the_default_gradient() -> None:
    assert region_output_type(REPLICATE) == Invariant
    assert region_output_type(shard(0)) == Shard(0)
    assert region_output_type(PARTIAL) == Partial
