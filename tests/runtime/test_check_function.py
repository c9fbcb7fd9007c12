"""spmd_stubs.testing.check_function on Megatron-style autograd Functions.

The Functions are written as Megatron writes them: collectives on the tp
group, a hand-written backward.  Their communication goes through
``spmd_stubs._comm`` (c10d calls on a real group, functional collectives in
the simulated world, which emulates only those) and the rank's slice through
``per_rank`` (the simulated world has no single rank), so the same Functions
run in both worlds.  Correct ones pass; each seeded fault fails, naming the
input, the axis and how far off it is.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from spmd_world import SimWorld, by_name, gloo_tests
from torch.distributed.device_mesh import DeviceMesh

import spmd_stubs as spmd
from spmd_stubs import I, S
from spmd_stubs._comm import all_gather_on, all_reduce_on, reduce_scatter_on
from spmd_stubs._ranks import per_rank
from spmd_stubs.axes import tp
from spmd_stubs.testing import check_function

TP = 2

# --------------------------------------------------------------------------
# Megatron's region helpers, on the tp group
# --------------------------------------------------------------------------


def _reduce(x: torch.Tensor) -> torch.Tensor:
    return all_reduce_on(x, spmd.group_of(tp))


def _gather(x: torch.Tensor, dim: int) -> torch.Tensor:
    return all_gather_on(x, dim % x.dim(), spmd.group_of(tp), TP)


def _split(x: torch.Tensor, dim: int) -> torch.Tensor:
    return per_rank(x, spmd.group_of(tp), lambda rank, t: t.chunk(TP, dim)[rank].contiguous())


def _reduce_scatter(x: torch.Tensor, dim: int) -> torch.Tensor:
    return reduce_scatter_on(x, dim % x.dim(), spmd.group_of(tp), TP)


def _function(name: str, forward: Callable[[torch.Tensor], torch.Tensor], backward: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """A ``torch.autograd.Function`` class with these forward and backward bodies."""

    def forward_(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return forward(x)

    def backward_(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return backward(g)

    namespace = {"forward": staticmethod(forward_), "backward": staticmethod(backward_)}
    return type(name, (torch.autograd.Function,), namespace)


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x.view_as(x)


CopyToRegion = _function("CopyToRegion", _identity, _reduce)
ReduceFromRegion = _function("ReduceFromRegion", _reduce, _identity)
GatherFromRegion = _function("GatherFromRegion", lambda x: _gather(x, -1), lambda g: _split(g, -1))
ScatterToRegion = _function("ScatterToRegion", lambda x: _split(x, -1), lambda g: _gather(g, -1))
GatherFromSequence = _function("GatherFromSequence", lambda x: _gather(x, 0), lambda g: _reduce_scatter(g, 0))
ReduceScatterToSequence = _function("ReduceScatterToSequence", lambda x: _reduce_scatter(x, 0), lambda g: _gather(g, 0))

# The seeded faults.
CopyForgetsAllReduce = _function("CopyForgetsAllReduce", _identity, _identity)
GatherSplitsInBackward = _function("GatherSplitsInBackward", lambda x: _gather(x, 0), lambda g: _split(g, 0))
ReduceAllReducesTwice = _function("ReduceAllReducesTwice", _reduce, _reduce)

CORRECT = {
    "copy_to_region": (CopyToRegion, (4, 6), ["I@tp"], ["R@tp"]),
    "reduce_from_region": (ReduceFromRegion, (4, 6), ["P@tp"], ["I@tp"]),
    "gather_from_region": (GatherFromRegion, (4, 3), [S(-1) @ tp], [I @ tp]),
    "scatter_to_region": (ScatterToRegion, (4, 6), ["I@tp"], ["S(-1)@tp"]),
    "gather_from_sequence": (GatherFromSequence, (2, 6), ["S(0)@tp"], ["R@tp"]),
    "reduce_scatter_to_sequence": (ReduceScatterToSequence, (4, 6), ["P@tp"], ["S(0)@tp"]),
    "copy_with_dp_passing_through": (CopyToRegion, (4, 6), ["I@tp, V@dp"], ["R@tp, V@dp"]),
}

FAULTS = {
    # Backward returns each rank's part of the pending sum as if it were the whole.
    "copy_forgets_all_reduce": (
        CopyForgetsAllReduce, (4, 6), ["I@tp"], ["R@tp"],
        r"input 0 \(I@tp[\s\S]*on tp: the ranks' gradients differ[\s\S]*a sum over tp is missing",
    ),
    # dy is P (parts of a sum): splitting keeps only this rank's part of the gradient.
    "gather_splits_in_backward": (
        GatherSplitsInBackward, (2, 6), ["S(0)@tp"], ["R@tp"],
        r"input 0 \(S\(0\)@tp[\s\S]*paired over tp: <backward, dx> = .* but <dy, J dx> = ",
    ),
    "reduce_all_reduces_twice": (
        ReduceAllReducesTwice, (4, 6), ["P@tp"], ["I@tp"],
        r"input 0 \(P@tp[\s\S]*backward is 2 times the declared gradient \(the size of tp",
    ),
    # A correct reduce declared P -> R: R's gradient is P, which backward would have to all-reduce.
    "reduce_declared_non_dual": (
        ReduceFromRegion, (4, 6), ["P@tp"], ["R@tp"],
        r"input 0 \(P@tp, so its gradient is R@tp\)[\s\S]*on tp: the ranks' gradients differ",
    ),
}


def _check_correct(name: str) -> None:
    fn, shape, types, returns = CORRECT[name]
    checks = check_function(fn, torch.zeros(shape), types=types, returns=returns)
    assert [check.ok for check in checks] == [True]


def _check_fault(name: str) -> str:
    fn, shape, types, returns, explained = FAULTS[name]
    with pytest.raises(AssertionError, match=explained) as failure:
        check_function(fn, torch.zeros(shape), types=types, returns=returns)
    return str(failure.value)


# --------------------------------------------------------------------------
# Simulated world
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CORRECT))
def test_correct_function_passes(sim: SimWorld, name: str) -> None:
    _check_correct(name)


@pytest.mark.parametrize("name", list(FAULTS))
def test_seeded_fault_is_named(sim: SimWorld, name: str) -> None:
    message = _check_fault(name)
    assert FAULTS[name][0].__name__ in message


def test_the_report_holds_both_sides(sim: SimWorld) -> None:
    (check,) = check_function(ReduceFromRegion, torch.zeros(3), types=["P@tp"], returns=[I @ tp])
    assert check.spread == {"tp": 0.0}
    assert check.backward == pytest.approx(check.forward, rel=1e-9)


def test_types_must_cover_every_tensor_input(sim: SimWorld) -> None:
    with pytest.raises(ValueError, match="2 types for 1 tensor inputs"):
        check_function(CopyToRegion, torch.zeros(3), types=["I@tp", "I@tp"], returns=["R@tp"])


def test_pending_max_is_refused(sim: SimWorld) -> None:
    with pytest.raises(ValueError, match="not Pmax@tp"):
        check_function(CopyToRegion, torch.zeros(3), types=["Pmax@tp"], returns=["R@tp"])


# --------------------------------------------------------------------------
# Real gloo ranks (2 dp x 2 tp)
# --------------------------------------------------------------------------


def correct_functions_pass(mesh: DeviceMesh) -> None:
    spmd.bind_mesh(mesh)
    try:
        for name in CORRECT:
            _check_correct(name)
    finally:
        spmd.unbind()


def seeded_faults_are_named(mesh: DeviceMesh) -> None:
    spmd.bind_mesh(mesh)
    try:
        for name in FAULTS:
            _check_fault(name)
    finally:
        spmd.unbind()


CHECKS = by_name(correct_functions_pass, seeded_faults_are_named)
gloo_world, test_gloo = gloo_tests(__name__, CHECKS)
