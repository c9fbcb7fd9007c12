"""Typed collectives with ``async_op=True``, and point-to-point (:mod:`p2p_checks`), on 4 real gloo
processes (2 dp x 2 tp), in one world.

Every case of the four collectives (:func:`spmd_cases.cases`: every layout,
``op="avg"``, uneven ``split_sizes``) runs through :func:`async_call`, which
asserts that the Pending's ``wait()`` gives exactly what the synchronous
call gives, forward and input gradient; :func:`spmd_cases.check` then holds
the result to the one-process reference (values, gradient types, adjoint).
The uneven all-to-all is held to :func:`row_exchange.reference`.  One check
shows the start returns while a peer has not even called yet.
"""

from __future__ import annotations

import time
from typing import Callable

import torch
import torch.distributed as dist
from p2p_checks import CHECKS as P2P_CHECKS
from row_exchange import SENDS, reference
from spmd_cases import Case, _as_arg, call, cases, check, uneven_sizes
from spmd_world import GROUPS, GlooWorld, by_name, gloo_tests
from torch.distributed.device_mesh import DeviceMesh

import spmd_stubs as spmd
from spmd_stubs import R, S, V
from spmd_stubs.axes import dp, tp

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
CASES = [case for case in cases() if case.op in COLLECTIVES]


def async_call(case: Case, axis: object, n: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """The case's call with ``async_op=True``, waited; asserting it equals the synchronous call, gradient included."""

    def run(x: torch.Tensor) -> torch.Tensor:
        pending = _started(case, x, axis, n)
        y = pending.wait()
        assert pending.wait() is y and pending.is_completed(), "wait() twice gives the same result"
        expected = call(case, x, axis, n)
        assert torch.equal(y, expected), f"{case.id}: async {y} != sync {expected}"
        grad = torch.randn_like(y)
        (got,) = torch.autograd.grad(y, x, grad, retain_graph=True)
        (want,) = torch.autograd.grad(expected, x, grad)
        assert torch.equal(got, want), f"{case.id}: async gradient {got} != sync {want}"
        return y

    return run


def _started(case: Case, x: torch.Tensor, axis: object, n: int) -> spmd.Pending[torch.Tensor]:
    """``call(case, x, axis, n)`` with ``async_op=True`` (a collective's arguments, as ``call`` passes them)."""
    kwargs: dict[str, object] = {"src": _as_arg(case.src), "dst": _as_arg(case.dst)}
    if case.avg:
        kwargs["op"] = "avg"
    if case.uneven:
        kwargs["split_sizes"] = uneven_sizes(n)
    pending: spmd.Pending[torch.Tensor] = getattr(spmd, case.op)(x, axis, **kwargs, async_op=True)
    return pending


def _every_case(axis: object, groups: list[list[int]]) -> Callable[[DeviceMesh], None]:
    def run(mesh: DeviceMesh) -> None:
        spmd.bind_mesh(mesh)
        try:
            for case in CASES:
                check(GlooWorld(), case, axis, groups, fn=async_call(case, axis, len(groups[0])))
        finally:
            spmd.unbind()

    return run


every_case_on_tp = _every_case(tp, GROUPS["tp"])
every_case_on_tp.__name__ = "every_case_on_tp"
every_case_on_flattened_dp_tp = _every_case((dp, tp), GROUPS["dp_tp"])
every_case_on_flattened_dp_tp.__name__ = "every_case_on_flattened_dp_tp"


def uneven_all_to_all(mesh: DeviceMesh) -> None:
    """Token dispatch with async_op=True: the counts, then the rows, against the one-process reference."""
    spmd.bind_mesh(mesh)
    try:
        for axis, groups in ((tp, GROUPS["tp"]), ((dp, tp), GROUPS["dp_tp"])):
            n, world = len(groups[0]), GlooWorld()
            index = {rank: i for group in groups for i, rank in enumerate(group)}
            me = index[dist.get_rank()]
            counts = torch.tensor(SENDS[n][me])
            received = spmd.all_to_all(counts, axis, src=V, dst=V, async_op=True).wait()
            gen = torch.Generator().manual_seed(n)
            xs = {rank: torch.randn(sum(SENDS[n][i]), 3, generator=gen, dtype=torch.float64) for rank, i in index.items()}
            gs = {rank: torch.randn(sum(row[i] for row in SENDS[n]), 3, generator=gen, dtype=torch.float64)
                  for rank, i in index.items()}
            expected, expected_grads = reference(groups, xs, gs)
            x = world.make(xs).requires_grad_()
            pending = spmd.all_to_all(x, axis, src=V, dst=V, input_split_sizes=counts.tolist(),
                                      output_split_sizes=received.tolist(), async_op=True)
            y = pending.wait()
            torch.testing.assert_close(y, expected[dist.get_rank()])
            y.backward(world.make(gs))
            assert x.grad is not None
            torch.testing.assert_close(x.grad, expected_grads[dist.get_rank()])
    finally:
        spmd.unbind()


def start_returns_before_the_peer_calls(mesh: DeviceMesh) -> None:
    """Rank 1 of each tp pair calls a second late; rank 0's start returns at once, its wait() after."""
    spmd.bind_mesh(mesh)
    late = dist.get_rank() % 2 == 1
    try:
        x = torch.full((4, 2), float(dist.get_rank()))
        if late:
            time.sleep(1.5)
        begun = time.monotonic()
        pending = spmd.all_gather(x, tp, src=S(0), dst=R, async_op=True)
        started = time.monotonic() - begun
        y = pending.wait()
        waited = time.monotonic() - begun
        if not late:
            assert started < 1.0 <= waited, f"start took {started:.2f} s, wait() returned after {waited:.2f} s"
        assert y.shape == (8, 2) and y[4:].eq(y[4, 0]).all()
    finally:
        spmd.unbind()


def validation_compares_the_calls_before_the_start(mesh: DeviceMesh) -> None:
    """Validation mode's exchange runs before the collective starts: ranks of different shapes both raise."""
    spmd.bind_mesh(mesh)
    spmd.set_validation(True)
    try:
        rows = 2 + dist.get_rank() % 2
        try:
            spmd.all_reduce(torch.ones(rows, 2), tp, dst=R, async_op=True)
        except ValueError as error:
            assert "disagree" in str(error) and "(2, 2)" in str(error) and "(3, 2)" in str(error), error
        else:
            raise AssertionError("ranks of different shapes were not reported")
    finally:
        spmd.set_validation(False)
        spmd.unbind()


CHECKS = by_name(
    every_case_on_tp,
    every_case_on_flattened_dp_tp,
    uneven_all_to_all,
    start_returns_before_the_peer_calls,
    validation_compares_the_calls_before_the_start,
) | P2P_CHECKS

gloo_world, test_gloo = gloo_tests(__name__, CHECKS)
