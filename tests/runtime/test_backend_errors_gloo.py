"""Ranks that disagree on a shape, on 4 real gloo processes (2 dp x 2 tp).

The shim does not compare shapes across ranks (that would cost a collective
per call); it turns the backend's ``RuntimeError`` into a ``ValueError`` that
names the call, the axis, the local shape and the fix, chained to the
backend's error.  A plain gloo group may abort a rank on a mismatch (the
receiving side's size check runs in a background thread), so these checks
run on groups made under ``TORCH_DISTRIBUTED_DEBUG=DETAIL``'s debug level,
where torch compares the shapes before each collective and every rank gets
the error; the group stays usable afterwards.  (torch does not compare the
shapes of an all_to_all, whose parts may differ by design: the simulated
world tests that one, tests/fuzz/test_runtime_bad_inputs.py.)
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


def _checked_tp_group() -> dist.ProcessGroup:
    """This rank's tp group, made with shape checking (every rank makes both, in order)."""
    level = dist.get_debug_level()
    dist.set_debug_level(dist.DebugLevel.DETAIL)
    try:
        groups = [dist.new_group(ranks) for ranks in GROUPS["tp"]]
    finally:
        dist.set_debug_level(level)
    return groups[dist.get_rank() // 2]


def _rows() -> int:
    """4 rows on even tp ranks, 6 on odd ones (both split evenly over 2 ranks)."""
    return 4 if dist.get_rank() % 2 == 0 else 6


def _expect_named_error(call: Callable[[], torch.Tensor], named: str, fix: str) -> None:
    spmd.bind_groups({tp: _checked_tp_group()})
    try:
        try:
            call()
        except ValueError as error:
            message = str(error)
            shape = f"shape ({_rows()}, 4)"
            for words in (named, "axis tp", shape, "Fix: ", fix, "TORCH_DISTRIBUTED_DEBUG=DETAIL"):
                assert words in message, (words, message)
            assert isinstance(error.__cause__, RuntimeError), repr(error.__cause__)
        else:
            raise AssertionError(f"{named} of different shapes did not raise")
        # The mismatch was caught before any data moved: the group still works.
        total = spmd.all_reduce(torch.ones(2), tp, src=P, dst=R)
        assert total.tolist() == [2.0, 2.0], total
    finally:
        spmd.unbind()


def all_reduce_of_different_shapes(mesh: DeviceMesh) -> None:
    _expect_named_error(
        lambda: spmd.all_reduce(torch.ones(_rows(), 4), tp, src=P, dst=R),
        "all_reduce(x, tp, src=P, dst=R)",
        "torch.nn.functional.pad",
    )


def all_gather_of_different_shapes(mesh: DeviceMesh) -> None:
    _expect_named_error(
        lambda: spmd.all_gather(torch.ones(_rows(), 4), tp, src=S(0), dst=R),
        "all_gather(x, tp, src=S(0), dst=R)",
        "split_sizes=",
    )


def reduce_scatter_of_different_shapes(mesh: DeviceMesh) -> None:
    _expect_named_error(
        lambda: spmd.reduce_scatter(torch.ones(_rows(), 4), tp, src=P, dst=S(0)),
        "reduce_scatter(x, tp, src=P, dst=S(0))",
        "split_sizes=",
    )


def vmap_over_a_collective(mesh: DeviceMesh) -> None:
    """Under ``torch.func.vmap`` the c10d call has no batching rule: the error says vmap, not shapes."""
    spmd.bind_groups({tp: _checked_tp_group()})
    try:
        try:
            torch.func.vmap(lambda v: spmd.all_reduce(v, tp, src=P, dst=R))(torch.ones(3, 4))
        except ValueError as error:
            message = str(error)
            named = "all_reduce(x, tp, src=P, dst=R) cannot run under torch.func.vmap"
            for words in (named, "Fix: call the collective outside vmap"):
                assert words in message, (words, message)
            assert "same shape" not in message, message
        else:
            raise AssertionError("a collective under vmap did not raise")
        total = spmd.all_reduce(torch.ones(2), tp, src=P, dst=R)
        assert total.tolist() == [2.0, 2.0], total
    finally:
        spmd.unbind()


CHECKS = by_name(
    vmap_over_a_collective,
    all_reduce_of_different_shapes,
    all_gather_of_different_shapes,
    reduce_scatter_of_different_shapes,
)


gloo_world, test_gloo = gloo_tests(__name__, CHECKS)
