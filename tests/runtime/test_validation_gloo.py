"""Validation mode on 4 real gloo processes (2 dp x 2 tp): ranks that disagree get a clear error.

Without it, these mismatches abort a rank, hang until the process-group
timeout or return wrong values (docs/robustness.md).  With
``spmd.set_validation(True)`` every rank of the group raises the same
``ValueError``, naming each rank's call, shape and dtype, and the group
stays usable.  The odd tp rank (global ranks 1 and 3) is the one that
differs in each check.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist
from spmd_world import GROUPS, by_name, gloo_tests
from torch.distributed.device_mesh import DeviceMesh

import spmd_stubs as spmd
from spmd_stubs import P, R, S
from spmd_stubs.axes import tp


def _odd() -> bool:
    return dist.get_rank() % 2 == 1


def _partner() -> int:
    return dist.get_rank() ^ 1


def _every_rank_raises(mesh: DeviceMesh, call: Callable[[], torch.Tensor], *words: str) -> None:
    spmd.bind_mesh(mesh)
    spmd.set_validation(True)
    try:
        try:
            call()
        except ValueError as error:
            message = str(error)
            for expected in (f"rank {dist.get_rank()} calls", f"rank {_partner()} calls", "axis tp", "Fix: ", *words):
                assert expected in message, (expected, message)
        else:
            raise AssertionError("the ranks disagree but no error was raised")
        total = spmd.all_reduce(torch.ones(2), tp, src=P, dst=R)  # the group still works
        assert total.tolist() == [2.0, 2.0], total
    finally:
        spmd.set_validation(False)
        spmd.unbind()


def all_gather_of_different_shapes(mesh: DeviceMesh) -> None:
    rows = 6 if _odd() else 4
    _every_rank_raises(mesh, lambda: spmd.all_gather(torch.ones(rows, 4), tp, src=S(0), dst=R),
                       "shape (4, 4)", "shape (6, 4)", "split_sizes=")


def all_to_all_of_different_rows(mesh: DeviceMesh) -> None:
    rows = 2 if _odd() else 4
    _every_rank_raises(mesh, lambda: spmd.all_to_all(torch.ones(rows, 3), tp, src=S(0), dst=S(1)),
                       "shape (2, 3)", "shape (4, 3)")


def all_reduce_of_the_same_numel_in_another_shape(mesh: DeviceMesh) -> None:
    shape = (3, 2) if _odd() else (2, 3)
    _every_rank_raises(mesh, lambda: spmd.all_reduce(torch.ones(shape), tp, src=P, dst=R), "shape (2, 3)", "shape (3, 2)")


def different_dtypes(mesh: DeviceMesh) -> None:
    dtype = torch.int32 if _odd() else torch.float32
    _every_rank_raises(mesh, lambda: spmd.all_reduce(torch.ones(2, dtype=dtype), tp, src=P, dst=R),
                       "dtype float32", "dtype int32", "one dtype")


def different_collectives(mesh: DeviceMesh) -> None:
    def call() -> torch.Tensor:
        if _odd():
            return spmd.all_gather(torch.ones(2), tp, src=S(0), dst=R)
        return spmd.all_reduce(torch.ones(2), tp, src=P, dst=R)

    _every_rank_raises(mesh, call, "all_reduce(x, tp, src=P, dst=R)", "all_gather(x, tp, src=S(0), dst=R)",
                       "same typed collective calls in the same order")


def agreeing_ranks_pass_and_uneven_parts_are_allowed(mesh: DeviceMesh) -> None:
    spmd.bind_mesh(mesh)
    spmd.set_validation(True)
    try:
        rows = 3 if _odd() else 1
        gathered = spmd.all_gather(torch.ones(rows, 2), tp, src=S(0), dst=R, split_sizes=[1, 3])
        assert gathered.shape == (4, 2), gathered.shape
        assert spmd.all_reduce(torch.ones(2), tp, src=P, dst=R).tolist() == [2.0, 2.0]
    finally:
        spmd.set_validation(False)
        spmd.unbind()


def a_group_this_rank_is_not_in(mesh: DeviceMesh) -> None:
    groups = [dist.new_group(ranks) for ranks in GROUPS["tp"]]
    other = groups[1 - dist.get_rank() // 2]
    try:
        spmd.all_reduce(torch.ones(2), tp, src=P, dst=R, group=other)
    except ValueError as error:
        assert "is not in" in str(error) and "Fix: " in str(error), str(error)
    else:
        raise AssertionError("a group this rank is not in was accepted")


CHECKS = by_name(
    all_gather_of_different_shapes,
    all_to_all_of_different_rows,
    all_reduce_of_the_same_numel_in_another_shape,
    different_dtypes,
    different_collectives,
    agreeing_ranks_pass_and_uneven_parts_are_allowed,
    a_group_this_rank_is_not_in,
)


gloo_world, test_gloo = gloo_tests(__name__, CHECKS)
