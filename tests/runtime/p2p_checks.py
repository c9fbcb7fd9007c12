"""Point-to-point checks for 4 real gloo processes (2 dp x 2 tp): ring steps and a 2-stage pipeline.

They run in the world of ``test_async_p2p_gloo`` (one spawn for both).

* :func:`spmd_stubs.ring_shift` on 2 ranks (tp) and 4 (dp, tp flattened),
  offsets +1 and -1, synchronous and ``async_op=True``: each rank's result
  is the block of the rank ``offset`` behind, its input gradient the
  gradient of the rank ``offset`` ahead (the one-process reference is the
  list of every rank's block, rotated).
* A 2-stage pipeline on ``pp`` (bound to the tp pairs): stage 0 sends its
  activation (``V@pp``) to stage 1, which sends its gradient back; the
  weights' gradients equal the whole model's in one process.  Once with
  send/recv, once with isend/irecv, once with batch_isend_irecv.
* Validation mode: a receive posted with another shape or dtype is reported
  on both ranks, naming both; matching transfers (the ring steps, the
  pipeline) pass.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist
from spmd_world import GROUPS, by_name
from torch.distributed.device_mesh import DeviceMesh

import spmd_stubs as spmd
from spmd_stubs.axes import dp, pp, tp


def _blocks(n: int) -> list[torch.Tensor]:
    """Every rank's block (index on the axis -> block), the same on every process."""
    gen = torch.Generator().manual_seed(n)
    return [torch.randn(3, 2, generator=gen, dtype=torch.float64) for _ in range(2 * n)]


def _ring_shifts(mesh: DeviceMesh) -> None:
    spmd.bind_mesh(mesh)
    for axis, groups in ((tp, GROUPS["tp"]), ((dp, tp), GROUPS["dp_tp"])):
        n = len(groups[0])
        me = next(group.index(dist.get_rank()) for group in groups if dist.get_rank() in group)
        blocks = _blocks(n)
        xs, grads = blocks[:n], blocks[n:]
        for offset in (1, -1):
            for async_op in (False, True):
                x = xs[me].clone().requires_grad_()
                if async_op:
                    pending = spmd.ring_shift(x, axis, offset=offset, async_op=True)
                    y = pending.wait()
                    assert pending.wait() is y and pending.is_completed()
                else:
                    y = spmd.ring_shift(x, axis, offset=offset)
                said = f"ring_shift on {n} ranks, offset={offset}, async_op={async_op}, index {me}"
                assert torch.equal(y, xs[(me - offset) % n]), said
                y.backward(grads[me])
                assert x.grad is not None and torch.equal(x.grad, grads[(me + offset) % n]), said


def ring_shift_on_2_and_4_ranks(mesh: DeviceMesh) -> None:
    try:
        _ring_shifts(mesh)
    finally:
        spmd.unbind()


# --------------------------------------------------------------------------
# A 2-stage pipeline on pp
# --------------------------------------------------------------------------

WIDTH, BATCH = 4, 3


def _stages() -> tuple[torch.nn.Linear, torch.nn.Linear, torch.Tensor]:
    """The two stages' layers and the input, the same in every process."""
    torch.manual_seed(0)
    first, second = torch.nn.Linear(WIDTH, WIDTH).double(), torch.nn.Linear(WIDTH, WIDTH).double()
    return first, second, torch.randn(BATCH, WIDTH, dtype=torch.float64)


def _loss(out: torch.Tensor) -> torch.Tensor:
    return out.tanh().square().sum()


Transfer = Callable[[torch.Tensor], None]
Receive = Callable[[], torch.Tensor]


def _send_recv() -> tuple[Transfer, Receive, Transfer, Receive]:
    shape = (BATCH, WIDTH)
    return (
        lambda act: spmd.send(act, pp, offset=1),
        lambda: spmd.recv(shape, torch.float64, pp, offset=-1),
        lambda grad: spmd.send(grad, pp, rank=0),
        lambda: spmd.recv(shape, torch.float64, pp, rank=1),
    )


def _isend_irecv() -> tuple[Transfer, Receive, Transfer, Receive]:
    shape = (BATCH, WIDTH)
    return (
        lambda act: spmd.isend(act, pp, offset=1).wait(),
        lambda: spmd.irecv(shape, torch.float64, pp, offset=-1).wait(),
        lambda grad: spmd.isend(grad, pp, offset=-1).wait(),
        lambda: spmd.irecv(shape, torch.float64, pp, offset=1).wait(),
    )


def _batched() -> tuple[Transfer, Receive, Transfer, Receive]:
    def one(op: spmd.P2POp) -> spmd.Pending[torch.Tensor | None]:
        return spmd.batch_isend_irecv([op])[0]

    shape = (BATCH, WIDTH)
    return (
        lambda act: one(spmd.P2POp.send(act, pp, offset=1)).wait(),
        lambda: _received(one(spmd.P2POp.recv(shape, torch.float64, pp, offset=-1))),
        lambda grad: one(spmd.P2POp.send(grad, pp, offset=-1)).wait(),
        lambda: _received(one(spmd.P2POp.recv(shape, torch.float64, pp, offset=1))),
    )


def _boundary() -> tuple[Transfer, Receive, Transfer, Receive]:
    """Through a declared stage boundary (spmd_stubs.pipeline): forward to the next stage, the gradient back."""
    activation: spmd.Boundary[torch.Tensor] = spmd.Boundary(pp)
    shape = (BATCH, WIDTH)
    return (
        activation.send,
        lambda: activation.recv(shape, torch.float64),
        activation.gradient().send,
        lambda: activation.gradient().recv(shape, torch.float64),
    )


def _received(pending: spmd.Pending[torch.Tensor | None]) -> torch.Tensor:
    got = pending.wait()
    assert got is not None
    return got


def _pipeline(transfers: Callable[[], tuple[Transfer, Receive, Transfer, Receive]]) -> Callable[[DeviceMesh], None]:
    def run(mesh: DeviceMesh) -> None:
        spmd.bind_groups({pp: mesh.get_group("tp")})
        try:
            send_act, recv_act, send_grad, recv_grad = transfers()
            first, second, x = _stages()
            stage = dist.get_rank(mesh.get_group("tp"))
            if stage == 0:
                act = first(x)
                send_act(act.detach())
                act.backward(recv_grad())
                mine, theirs = first, second
            else:
                act = recv_act().requires_grad_()
                _loss(second(act)).backward()
                assert act.grad is not None
                send_grad(act.grad)
                mine, theirs = second, first
            ref_first, ref_second, ref_x = _stages()
            _loss(ref_second(ref_first(ref_x))).backward()
            ref = ref_first if stage == 0 else ref_second
            for got, want in zip(mine.parameters(), ref.parameters()):
                assert got.grad is not None and want.grad is not None
                torch.testing.assert_close(got.grad, want.grad)
            assert all(p.grad is None for p in theirs.parameters())
        finally:
            spmd.unbind()

    run.__name__ = f"pipeline_{transfers.__name__.strip('_')}"
    return run


# --------------------------------------------------------------------------
# Validation mode
# --------------------------------------------------------------------------


def _both_raise(mesh: DeviceMesh, transfer: Callable[[int], object], *words: str) -> None:
    spmd.bind_groups({pp: mesh.get_group("tp")})
    spmd.set_validation(True)
    try:
        try:
            transfer(dist.get_rank(mesh.get_group("tp")))
        except ValueError as error:
            missing = [word for word in words if word not in str(error)]
            assert not missing, f"{missing} not in: {error}"
        else:
            raise AssertionError("the mismatch was not reported")
    finally:
        spmd.set_validation(False)
        spmd.unbind()


def validation_reports_a_receive_of_another_shape(mesh: DeviceMesh) -> None:
    def transfer(stage: int) -> object:
        if stage == 0:
            return spmd.send(torch.ones(3, 4), pp, offset=1)
        return spmd.recv((3, 5), torch.float32, pp, offset=-1)

    first = dist.get_rank() - dist.get_rank() % 2
    _both_raise(mesh, transfer, "axis pp", f"rank {first}", f"rank {first + 1}", "(3, 4)", "(3, 5)",
                "Fix: receive", "recv((3, 4), torch.float32, pp, rank=0)")


def validation_reports_a_receive_of_another_dtype(mesh: DeviceMesh) -> None:
    def transfer(stage: int) -> object:
        if stage == 0:
            return spmd.isend(torch.ones(2, dtype=torch.float64), pp, offset=1).wait()
        return spmd.irecv((2,), torch.float32, pp, offset=-1).wait()

    _both_raise(mesh, transfer, "shape (2,) and dtype float64", "shape (2,) and dtype float32")


def validation_passes_matching_transfers(mesh: DeviceMesh) -> None:
    spmd.set_validation(True)
    try:
        ring_shift_on_2_and_4_ranks(mesh)
        _pipeline(_batched)(mesh)
    finally:
        spmd.set_validation(False)
        spmd.unbind()


CHECKS = by_name(
    ring_shift_on_2_and_4_ranks,
    _pipeline(_send_recv),
    _pipeline(_isend_irecv),
    _pipeline(_batched),
    _pipeline(_boundary),
    validation_reports_a_receive_of_another_shape,
    validation_reports_a_receive_of_another_dtype,
    validation_passes_matching_transfers,
)
