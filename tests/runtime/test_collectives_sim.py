"""Every typed operation in the simulated world: values, gradient types, adjoints."""

from __future__ import annotations

import pytest
from spmd_cases import Case, cases, check
from spmd_world import GROUPS, SimWorld

from spmd_stubs import core
from spmd_stubs._kernels import KERNELS
from spmd_stubs.axes import dp, tp

CASES = cases()


def test_every_transition_has_exactly_one_kernel() -> None:
    cells = {(op, s, d) for op, s, d, _ in core.transitions()}
    assert set(KERNELS) == cells


def test_the_cases_cover_every_transition() -> None:
    covered = {(c.op, c.src.kind if c.op not in core.IMPLICIT_PARTIAL else core.Kind.P, c.dst.kind) for c in CASES}
    assert covered == {(op, s, d) for op, s, d, _ in core.transitions()}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_on_tp(sim: SimWorld, case: Case) -> None:
    """tp is a 2-rank subgroup: rank-dependent casts must use the index in the group."""
    check(sim, case, tp, GROUPS["tp"])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_on_flattened_dp_tp(sim: SimWorld, case: Case) -> None:
    check(sim, case, (dp, tp), GROUPS["dp_tp"])
