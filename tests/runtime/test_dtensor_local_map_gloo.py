"""DTensor's ``local_map`` on gloo: each placement pair of spmd_stubs/core/local_regions.py, checked.

Every check runs on the 2-rank ``tp`` sub-mesh of the 2 dp x 2 tp gloo world
and compares a gradient with the same computation done in one process.  A
region input enters through ``to_local(grad_placements=...)``; its gradient
reaches the plain tensor ``x`` behind ``DTensor.from_local(x, tp, [...])``.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch
from spmd_world import by_name, gloo_tests
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Placement, Replicate, Shard
from torch.distributed.tensor.experimental import local_map

X = torch.tensor([[1.0, 2.0, -1.0], [0.5, 0.0, 3.0]])
WEIGHT = torch.tensor([[1.0, -2.0, 0.5], [3.0, 1.0, 0.0], [0.0, 2.0, -1.0], [1.5, 0.5, 2.0]])
COTANGENT = torch.tensor([[1.0, 2.0, 3.0, 4.0], [-1.0, 0.5, 2.0, 0.0]])


def _region_input_gradient(mesh: DeviceMesh, placement: Placement, local: torch.Tensor,
                           body: Callable[[torch.Tensor], torch.Tensor], out: Placement,
                           grad: Sequence[Placement] | None) -> torch.Tensor:
    """The gradient reaching ``local`` (entering as ``placement``) of ``sum(full(body(local)) * COTANGENT)``."""
    x = local.clone().requires_grad_()
    region = local_map(body, out_placements=[out], in_placements=([placement],),
                       in_grad_placements=None if grad is None else (grad,), device_mesh=mesh)
    y = region(DTensor.from_local(x, mesh, [placement]))
    (y.full_tensor() * COTANGENT).sum().backward()
    assert x.grad is not None
    return x.grad


def _reference(x: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """One process: the gradient of ``sum(fn(x) * COTANGENT)``."""
    x = x.clone().requires_grad_()
    (fn(x) * COTANGENT).sum().backward()
    assert x.grad is not None
    return x.grad


def check_replicate_input_with_a_sharded_weight_is_r(world: DeviceMesh) -> None:
    """Replicate in, colwise weight in the body: the default gradient (I) is one rank's share, Partial (R)
    sums them to the whole."""
    mesh = world["tp"]
    rank_weight = WEIGHT.chunk(2)[mesh.get_local_rank()]
    want = _reference(X, lambda x: x @ WEIGHT.T)
    colwise = lambda x: x @ rank_weight.T  # noqa: E731 -- the body, as local_map's first argument

    under_reduced = _region_input_gradient(mesh, Replicate(), X, colwise, Shard(1), None)
    share = COTANGENT.chunk(2, dim=1)[mesh.get_local_rank()] @ rank_weight
    torch.testing.assert_close(under_reduced, share)  # one rank's term of the sum
    assert not torch.allclose(share, want)
    fixed = _region_input_gradient(mesh, Replicate(), X, colwise, Shard(1), [Partial()])
    torch.testing.assert_close(fixed, want)


def check_replicate_input_with_whole_work_is_i(world: DeviceMesh) -> None:
    """Replicate in, the same work on every rank: the default gradient (I) is the whole one, Partial (R)
    counts it once per rank."""
    mesh = world["tp"]
    whole = lambda x: x @ WEIGHT.T  # noqa: E731
    want = _reference(X, whole)
    torch.testing.assert_close(_region_input_gradient(mesh, Replicate(), X, whole, Replicate(), None), want)
    twice = _region_input_gradient(mesh, Replicate(), X, whole, Replicate(), [Partial()])
    torch.testing.assert_close(twice, 2 * want)


def check_replicate_input_of_a_partial_result_takes_a_partial_gradient(world: DeviceMesh) -> None:
    """Replicate in, Partial out (docs/spec.md#layouts-held-as-data): whatever the body, each rank's
    gradient is its share of the sum, so only Partial gives the whole one; here with each rank's part of a
    rowwise product and with the whole work scaled by one over the axis size."""
    mesh = world["tp"]
    rank = mesh.get_local_rank()
    want = _reference(X, lambda x: x @ WEIGHT.T)
    rowwise = lambda x: x[:, rank::2] @ WEIGHT[:, rank::2].T  # noqa: E731
    halved = lambda x: (x @ WEIGHT.T) / 2  # noqa: E731
    for body in (rowwise, halved):
        share = _region_input_gradient(mesh, Replicate(), X, body, Partial(), None)
        assert not torch.allclose(share, want)
        torch.testing.assert_close(_region_input_gradient(mesh, Replicate(), X, body, Partial(), [Partial()]), want)


def check_shard_input_is_s(world: DeviceMesh) -> None:
    """Shard(0) in and out: each rank's piece of the gradient."""
    mesh = world["tp"]
    rank = mesh.get_local_rank()
    want = _reference(X, lambda x: torch.tensor([[1.0], [2.0]]) * (x @ WEIGHT.T))
    scale = float(rank + 1)
    got = _region_input_gradient(mesh, Shard(0), X.chunk(2)[rank], lambda x: scale * (x @ WEIGHT.T), Shard(0), None)
    torch.testing.assert_close(got, want.chunk(2)[rank])


def check_partial_input_is_p_and_its_partial_gradient_double_counts(world: DeviceMesh) -> None:
    """Partial in and out: the default gradient (Replicate) is the gradient of the sum on every rank (P);
    read as Partial it is counted once per rank."""
    mesh = world["tp"]
    part = X * (mesh.get_local_rank() + 1)
    want = _reference(part, lambda x: 3 * (x @ WEIGHT.T))
    tripled = lambda x: 3 * (x @ WEIGHT.T)  # noqa: E731
    torch.testing.assert_close(_region_input_gradient(mesh, Partial(), part, tripled, Partial(), None), want)
    doubled = _region_input_gradient(mesh, Partial(), part, tripled, Partial(), [Partial()])
    torch.testing.assert_close(doubled, 2 * want)


CHECKS = by_name(check_replicate_input_with_a_sharded_weight_is_r, check_replicate_input_with_whole_work_is_i,
                 check_replicate_input_of_a_partial_result_takes_a_partial_gradient, check_shard_input_is_s, check_partial_input_is_p_and_its_partial_gradient_double_counts)

gloo_world, test_gloo = gloo_tests(__name__, CHECKS)
