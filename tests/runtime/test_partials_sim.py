"""Pending avg/max/min (``Pavg``, ``Pmax``, ``Pmin``) in the simulated world: values and gradients.

The checks (``partial_checks``) compare with plain autograd of the global
meaning; the same checks run on 4 gloo ranks in ``test_partials_gloo``.
"""

from __future__ import annotations

import pytest
import torch
from partial_checks import check_double_backward, check_make, check_resolve, check_softmax
from spmd_world import GROUPS, SimWorld

import spmd_stubs as spmd
from spmd_stubs import I, P, Pavg, Pmax, R, S, V
from spmd_stubs.axes import dp, tp

AXES = [(tp, GROUPS["tp"]), ((dp, tp), GROUPS["dp_tp"])]
AXIS_IDS = ["tp", "dp_tp"]


@pytest.mark.parametrize("axis,groups", AXES, ids=AXIS_IDS)
@pytest.mark.parametrize("dst", [R, I], ids=["R", "I"])
@pytest.mark.parametrize("reduce", ["avg", "max", "min"])
def test_all_reduce(sim: SimWorld, reduce: str, dst: object, axis: object, groups: list[list[int]]) -> None:
    check_resolve(sim, "all_reduce", reduce, dst, axis, groups)


@pytest.mark.parametrize("axis,groups", AXES, ids=AXIS_IDS)
@pytest.mark.parametrize("dst", [V, S(0), S(1), S(-1)], ids=["V", "S0", "S1", "S-1"])
@pytest.mark.parametrize("reduce", ["avg", "max", "min"])
def test_reduce_scatter(sim: SimWorld, reduce: str, dst: object, axis: object, groups: list[list[int]]) -> None:
    check_resolve(sim, "reduce_scatter", reduce, dst, axis, groups)


@pytest.mark.parametrize("reduce", ["avg", "max", "min"])
def test_reduce_scatter_uneven(sim: SimWorld, reduce: str) -> None:
    check_resolve(sim, "reduce_scatter", reduce, S(0), tp, GROUPS["tp"], split_sizes=[1, 3])


@pytest.mark.parametrize("axis,groups", AXES, ids=AXIS_IDS)
@pytest.mark.parametrize("op", ["convert", "reinterpret"])
@pytest.mark.parametrize("reduce", ["avg", "max", "min"])
def test_make_pending(sim: SimWorld, op: str, reduce: str, axis: object, groups: list[list[int]]) -> None:
    check_make(sim, op, reduce, axis, groups)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_vocab_parallel_softmax(sim: SimWorld, log: bool) -> None:
    """examples/vocab_parallel_softmax.py (written for tp) equals torch.softmax / log_softmax."""
    check_softmax(sim, tp, GROUPS["tp"], log)


def test_gradient_of_the_gradient(sim: SimWorld) -> None:
    check_double_backward(sim, tp, GROUPS["tp"])


def test_pavg_is_all_reduce_avg(sim: SimWorld) -> None:
    """src=Pavg computes what op="avg" on a pending sum does, forward and backward."""
    x = sim.make({r: torch.tensor([float(r), 2.0 * r]) for r in range(4)}).requires_grad_()
    a = spmd.all_reduce(x, tp, src=Pavg, dst=R)
    b = spmd.all_reduce(x, tp, src=P, dst=R, op="avg")
    torch.testing.assert_close(sim.parts(a), sim.parts(b))
    g = sim.make({r: torch.tensor([1.0, float(r)]) for r in range(4)})
    (ga,) = torch.autograd.grad(a, x, g)
    (gb,) = torch.autograd.grad(b, x, g)
    torch.testing.assert_close(sim.parts(ga), sim.parts(gb))


def test_op_avg_on_a_named_reduction_is_an_error(sim: SimWorld) -> None:
    x = sim.make({r: torch.ones(2) for r in range(4)})
    with pytest.raises(ValueError, match="already names its reduction"):
        spmd.all_reduce(x, tp, src=Pmax, dst=R, op="avg")


def test_invalid_non_sum_transitions_raise_the_algebra_error(sim: SimWorld) -> None:
    x = sim.make({r: torch.ones(2) for r in range(4)})
    with pytest.raises(ValueError, match="Pmax"):
        spmd.convert(x, tp, src=I, dst=Pmax, expert_mode=True)
    with pytest.raises(ValueError, match="Pmax"):
        spmd.all_gather(x, tp, src=Pmax, dst=R)
