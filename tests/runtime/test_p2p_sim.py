"""Point-to-point in the simulated world: ring_shift as an all-gather, send/recv refused.

:func:`spmd_stubs.ring_shift` has no point-to-point in one process: each
simulated rank keeps the block of the rank ``offset`` behind from an
all-gather, with the same values and gradients as on real ranks (held here
to the list of every rank's block, rotated).  A send or receive there is a
``ValueError`` saying to run the stages as processes.
"""

from __future__ import annotations

import pytest
import torch
from spmd_world import GROUPS, SimWorld

import spmd_stubs as spmd
from spmd_stubs.axes import dp, pp, tp


@pytest.mark.parametrize("async_op", [False, True])
@pytest.mark.parametrize("offset", [1, -1])
@pytest.mark.parametrize("axis", [tp, (dp, tp)], ids=["tp", "dp_tp"])
def test_ring_shift(sim: SimWorld, axis: object, offset: int, async_op: bool) -> None:
    groups = GROUPS["tp" if axis is tp else "dp_tp"]
    n = len(groups[0])
    gen = torch.Generator().manual_seed(n)
    xs = {rank: torch.randn(3, 2, generator=gen) for rank in range(4)}
    gs = {rank: torch.randn(3, 2, generator=gen) for rank in range(4)}
    x = sim.make(xs).requires_grad_()
    y = spmd.ring_shift(x, axis, offset=offset, async_op=True).wait() if async_op else spmd.ring_shift(x, axis, offset=offset)
    y.backward(sim.make(gs))
    ys, grads = sim.parts(y), sim.parts(x.grad)
    for group in groups:
        for k, rank in enumerate(group):
            torch.testing.assert_close(ys[rank], xs[group[(k - offset) % n]])
            torch.testing.assert_close(grads[rank], gs[group[(k + offset) % n]])


def test_send_is_refused(sim: SimWorld) -> None:
    spmd.bind_groups({pp: spmd.group_of(tp)})
    with pytest.raises(ValueError, match="run between real ranks"):
        spmd.send(sim.make({rank: torch.ones(2) for rank in range(4)}), pp, offset=1)
