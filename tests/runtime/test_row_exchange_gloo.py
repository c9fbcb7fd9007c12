"""The uneven all-to-all on 4 real gloo processes (2 dp x 2 tp): on 2 and 4 ranks, and validation mode.

With ``spmd.set_validation(True)`` ranks whose row counts do not match
(one rank's ``output_split_sizes`` against its peers' ``input_split_sizes``,
or a rank's ``x`` against its own) each raise the same ``ValueError``,
naming both ranks and their sizes, instead of hanging or exchanging
garbage; the group stays usable.  The odd tp rank (global ranks 1 and 3)
is the one that errs.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist
from row_exchange import SENDS, check_exchange
from spmd_world import GROUPS, GlooWorld, by_name, gloo_tests
from torch.distributed.device_mesh import DeviceMesh

import spmd_stubs as spmd
from spmd_stubs import P, R, V
from spmd_stubs.axes import dp, tp


def on_tp(mesh: DeviceMesh) -> None:
    spmd.bind_mesh(mesh)
    try:
        check_exchange(GlooWorld(), tp, GROUPS["tp"])
    finally:
        spmd.unbind()


def on_flattened_dp_tp(mesh: DeviceMesh) -> None:
    spmd.bind_mesh(mesh)
    try:
        check_exchange(GlooWorld(), (dp, tp), GROUPS["dp_tp"])
    finally:
        spmd.unbind()


def _odd() -> bool:
    return dist.get_rank() % 2 == 1


def _every_rank_raises(mesh: DeviceMesh, call: Callable[[], torch.Tensor], *words: str) -> None:
    spmd.bind_mesh(mesh)
    spmd.set_validation(True)
    try:
        try:
            call()
        except ValueError as error:
            message = str(error)
            for expected in ("all_to_all(x, tp, src=V, dst=V) with input_split_sizes=", "axis tp", "Fix: ", *words):
                assert expected in message, (expected, message)
        else:
            raise AssertionError("the ranks' row counts disagree but no error was raised")
        total = spmd.all_reduce(torch.ones(2), tp, src=P, dst=R)  # the group still works
        assert total.tolist() == [2.0, 2.0], total
    finally:
        spmd.set_validation(False)
        spmd.unbind()


def _sent() -> list[int]:
    return SENDS[2][dist.get_rank() % 2]


def output_sizes_that_disagree(mesh: DeviceMesh) -> None:
    """The odd rank expects 2 rows from its even partner, which sends it 3."""
    even = dist.get_rank() - dist.get_rank() % 2
    received = [2, 0] if _odd() else [1, 0]
    x = torch.ones(sum(_sent()), 3)
    _every_rank_raises(
        mesh, lambda: spmd.all_to_all(x, tp, src=V, dst=V, input_split_sizes=_sent(), output_split_sizes=received),
        f"rank {even} sends rank {even + 1} 3 rows (input_split_sizes[1] on rank {even}), "
        f"but rank {even + 1} expects 2 from it (output_split_sizes[0] on rank {even + 1})",
        "output_split_sizes = all_to_all(torch.tensor(input_split_sizes), tp, src=V, dst=V).tolist()",
    )


def rows_that_disagree_with_the_sizes(mesh: DeviceMesh) -> None:
    """The odd rank sends nothing but holds a row: every rank hears of it, not only the odd one."""
    x = torch.ones(sum(_sent()) + (1 if _odd() else 0), 3)
    odd = dist.get_rank() | 1
    received = [3, 0] if _odd() else [1, 0]
    _every_rank_raises(
        mesh, lambda: spmd.all_to_all(x, tp, src=V, dst=V, input_split_sizes=_sent(), output_split_sizes=received),
        f"rank {odd} sends 0 rows in all (its input_split_sizes=[0, 0]), but its x holds 1 on dim 0",
    )


def counts_of_another_dtype_keep_their_dtype(mesh: DeviceMesh) -> None:
    """The counts exchange: integers, no gradient, the dtype kept (int32 here; torch.bincount gives int64)."""
    spmd.bind_mesh(mesh)
    try:
        counts = torch.tensor(_sent(), dtype=torch.int32)
        received = spmd.all_to_all(counts, tp, src=V, dst=V)
        assert received.dtype == torch.int32 and not received.requires_grad
        assert received.tolist() == ([3, 0] if _odd() else [1, 0]), received
    finally:
        spmd.unbind()


CHECKS = by_name(on_tp, on_flattened_dp_tp, output_sizes_that_disagree, rows_that_disagree_with_the_sizes,
                 counts_of_another_dtype_keep_their_dtype)


gloo_world, test_gloo = gloo_tests(__name__, CHECKS)
