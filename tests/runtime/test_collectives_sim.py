"""Every typed operation in the simulated world: values, gradient types, adjoints."""

from __future__ import annotations

import pytest
from spmd_cases import Case, cases, check, check_in_place, in_place_cases
from spmd_world import GROUPS, SimWorld

from spmd_stubs import core
from spmd_stubs._kernels import KERNELS
from spmd_stubs.axes import dp, tp

CASES = cases()


def test_the_kernels_are_exactly_the_rows_kernels() -> None:
    """Every row names a kernel of KERNELS, every kernel is named, and each function is there once."""
    assert set(KERNELS) == {row.kernel for row in core.TRANSITIONS}
    assert len(set(KERNELS.values())) == len(KERNELS)


def test_the_cases_cover_every_transition() -> None:
    covered = {(c.op, c.src.kind if c.op not in core.IMPLICIT_PARTIAL else core.Kind.P, c.dst.kind) for c in CASES}
    assert covered == {row.key for row in core.TRANSITIONS}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_on_tp(sim: SimWorld, case: Case) -> None:
    """tp is a 2-rank subgroup: rank-dependent casts must use the index in the group."""
    check(sim, case, tp, GROUPS["tp"])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_on_flattened_dp_tp(sim: SimWorld, case: Case) -> None:
    check(sim, case, (dp, tp), GROUPS["dp_tp"])


@pytest.mark.parametrize("case", in_place_cases(), ids=lambda c: c.id)
def test_in_place_all_reduce(sim: SimWorld, case: Case) -> None:
    check_in_place(sim, case, tp, GROUPS["tp"])
