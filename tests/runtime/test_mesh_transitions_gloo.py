"""reinterpret_mesh on 4 real gloo processes: dense ``(dp, tp)`` (2 x 2) and experts on ``ep``, its flattening.

Against a one-process reference: a value moved to ``ep`` and gathered there
is the value gathered over ``(dp, tp)``, and the gradient flows back to each
rank's part unchanged.  ``ep`` bound to the ranks in another order is refused
on every rank, naming both groups and their ranks.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from spmd_world import GROUPS, by_name, gloo_tests
from torch.distributed.device_mesh import DeviceMesh

import spmd_stubs as spmd
from spmd_stubs import S
from spmd_stubs.axes import dp, ep, tp


def _part(rank: int) -> torch.Tensor:
    return torch.arange(3.0) + 10 * rank


def _bound(mesh: DeviceMesh, ranks: list[int]) -> None:
    spmd.bind_mesh(mesh)
    group = dist.new_group(ranks, sort_ranks=False)
    spmd.bind_groups({ep: group})


def moved_to_the_flattened_axis(mesh: DeviceMesh) -> None:
    """S(0)@(dp, tp) -> S(0)@ep: gathered on ep it is the whole, every rank's part in flattened order."""
    _bound(mesh, GROUPS["dp_tp"][0])
    try:
        x = _part(dist.get_rank()).requires_grad_()
        on_ep = spmd.reinterpret_mesh(x, {(dp, tp): ep})
        whole = spmd.all_gather(on_ep, ep, src=S(0), dst=spmd.R)
        reference = torch.cat([_part(rank) for rank in GROUPS["dp_tp"][0]])
        assert torch.equal(whole.detach(), reference), (whole, reference)
        weights = torch.arange(12.0)
        (whole * weights).sum().backward()
        # R@ep's gradient is P@ep: summed over the 4 ranks' identical seeds, then split back.
        expected = 4 * weights[3 * dist.get_rank():3 * dist.get_rank() + 3]
        assert x.grad is not None and torch.equal(x.grad, expected), (x.grad, expected)
    finally:
        spmd.unbind()


def other_ranks_refused(mesh: DeviceMesh) -> None:
    """ep bound to the ranks of (tp, dp): not (dp, tp)'s order, so every rank refuses the move."""
    spmd.bind_mesh(mesh)
    ranks = [0, 2, 1, 3]
    group = dist.new_group(ranks, sort_ranks=False)
    spmd.bind_groups({ep: group})
    try:
        spmd.reinterpret_mesh(torch.ones(2), {(dp, tp): ep})
    except ValueError as error:
        message = str(error)
        for expected in ("reinterpret_mesh moves (dp, tp) to ep", "[0, 1, 2, 3]", "Fix: "):
            assert expected in message, (expected, message)
    else:
        raise AssertionError("ep's ranks are not (dp, tp)'s in order, but the move was accepted")
    finally:
        spmd.unbind()


CHECKS = by_name(moved_to_the_flattened_axis, other_ranks_refused)


gloo_world, test_gloo = gloo_tests(__name__, CHECKS)
