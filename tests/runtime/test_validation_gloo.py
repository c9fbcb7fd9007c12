"""Validation mode on 4 real gloo processes (2 dp x 2 tp): ranks that disagree get a clear error.

Without it, these mismatches abort a rank, hang until the process-group
timeout or return wrong values (docs/robustness.md).  With
``spmd.set_validation(True)`` every rank of the group raises the same
``ValueError``, naming each rank's call (with the options that must agree:
``op=``, ``split_sizes=``, the group's members), shape and dtype, and the
group stays usable.  The odd tp rank (global ranks 1 and 3) is the one
that differs in each check, but for the group's members.
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


def different_reduction_ops(mesh: DeviceMesh) -> None:
    # Without validation: 1.0 on the averaging rank, 2.0 on the other, both typed R.
    op = "avg" if _odd() else "sum"
    _every_rank_raises(mesh, lambda: spmd.all_reduce(torch.ones(2), tp, src=P, dst=R, op=op),
                       'all_reduce(x, tp, src=P, dst=R, op="sum")', 'all_reduce(x, tp, src=P, dst=R, op="avg")',
                       "the same op=")


def _mirrored_split_sizes() -> list[int]:
    """[1, 3] on even tp ranks, [3, 1] on odd ones: each rank's own part is 1 row either way."""
    return [3, 1] if _odd() else [1, 3]


def all_gather_with_different_split_sizes(mesh: DeviceMesh) -> None:
    # Without validation: each rank pads its 1 row to 3 and keeps 3 rows of its peer's, 2 of them zeros.
    sizes = _mirrored_split_sizes()
    _every_rank_raises(mesh, lambda: spmd.all_gather(torch.ones(1, 2), tp, src=S(0), dst=R, split_sizes=sizes),
                       "split_sizes=[1, 3]", "split_sizes=[3, 1]", "the same split_sizes=")


def convert_with_different_split_sizes(mesh: DeviceMesh) -> None:
    # Without validation: rank 0 keeps row 0, rank 1 row 3; rows 1 and 2 are in no part.
    sizes = _mirrored_split_sizes()
    _every_rank_raises(mesh, lambda: spmd.convert(torch.arange(4.0), tp, src=R, dst=S(0), split_sizes=sizes),
                       "split_sizes=[1, 3]", "split_sizes=[3, 1]", "the same split_sizes=")


def different_group_members(mesh: DeviceMesh) -> None:
    """Global ranks 0 and 3 share one communicator, each told different members.

    Every rank makes one group, as torch requires, but from its own list:
    ranks 0 and 3 are the only members of theirs (1 and 2 are in none), so
    they connect, rank 0 believing its peer is rank 1, rank 3 that its
    peer is rank 2: a collective between them would "succeed".
    """
    told = {0: [0, 1], 1: [0, 3], 2: [0, 3], 3: [2, 3]}[dist.get_rank()]
    group = dist.new_group(told)
    if dist.get_rank() not in (0, 3):
        return
    spmd.set_validation(True)
    try:
        try:
            spmd.all_reduce(torch.ones(2), tp, src=P, dst=R, group=group)
        except ValueError as error:
            message = str(error)
            for expected in ("rank 0 calls", "rank 3 calls", "global ranks [0, 1]", "global ranks [2, 3]",
                             "Fix: ", "dist.new_group"):
                assert expected in message, (expected, message)
        else:
            raise AssertionError("the ranks disagree on the group's members but no error was raised")
    finally:
        spmd.set_validation(False)


def agreeing_ranks_pass_and_uneven_parts_are_allowed(mesh: DeviceMesh) -> None:
    spmd.bind_mesh(mesh)
    spmd.set_validation(True)
    try:
        rows = 3 if _odd() else 1
        gathered = spmd.all_gather(torch.ones(rows, 2), tp, src=S(0), dst=R, split_sizes=[1, 3])
        assert gathered.shape == (4, 2), gathered.shape
        assert spmd.all_reduce(torch.ones(2), tp, src=P, dst=R).tolist() == [2.0, 2.0]
        assert spmd.all_reduce(torch.ones(2), tp, src=P, dst=R, op="avg").tolist() == [1.0, 1.0]
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
    different_reduction_ops,
    all_gather_with_different_split_sizes,
    convert_with_different_split_sizes,
    different_group_members,
    agreeing_ranks_pass_and_uneven_parts_are_allowed,
    a_group_this_rank_is_not_in,
)


gloo_world, test_gloo = gloo_tests(__name__, CHECKS)
