"""reinterpret_mesh in the simulated world: a 2 dp x 2 tp mesh and ep bound to its flattening.

A value moved from S(0)@(dp, tp) to S(0)@ep is every rank's own tensor (an
alias), gathered on ep it is the whole in flattened order, and the
gradient comes back to each rank's part; ep bound to the ranks of (tp, dp)
is refused.
"""

from __future__ import annotations

import pytest
import torch
from spmd_world import SimWorld

import spmd_stubs as spmd
from spmd_stubs import R, S
from spmd_stubs.axes import dp, ep, tp


def _parts() -> dict[int, torch.Tensor]:
    return {rank: torch.arange(3.0) + 10 * rank for rank in range(4)}


def test_moved_and_gathered_on_the_flattened_axis(sim: SimWorld) -> None:
    spmd.bind_groups({ep: spmd.group_of((dp, tp))})
    x = sim.make(_parts()).requires_grad_()
    whole = spmd.all_gather(spmd.reinterpret_mesh(x, {(dp, tp): ep}), ep, src=S(0), dst=R)
    expected = torch.cat([_parts()[rank] for rank in range(4)])
    for rank, got in sim.parts(whole.detach()).items():
        assert torch.equal(got, expected), (rank, got)
    (whole * torch.arange(12.0)).sum().backward()
    assert x.grad is not None
    for rank, grad in sim.parts(x.grad).items():
        assert torch.equal(grad, 4 * torch.arange(12.0)[3 * rank:3 * rank + 3]), (rank, grad)


def test_other_order_refused(sim: SimWorld) -> None:
    spmd.bind_groups({ep: spmd.group_of((tp, dp))})
    with pytest.raises(ValueError, match=r"reinterpret_mesh moves \(dp, tp\) to ep"):
        spmd.reinterpret_mesh(sim.make(_parts()), {(dp, tp): ep})
