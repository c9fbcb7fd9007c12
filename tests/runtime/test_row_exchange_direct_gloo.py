"""The uneven all-to-all's direct path on 4 real gloo processes (2 dp x 2 tp).

A call that records nothing for autograd, outside validation mode, goes
straight to the group once its counts pass the checks, without the checked
path (``_Site.rows_bound``): its values must be the reference's, for
counts given as a list or a tuple.  Counts that fail a check take the checked
path on real ranks too and get its error, before anything is sent.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import pytest
import torch
import torch.distributed as dist
from row_exchange import SENDS, WIDTH, reference
from spmd_world import GROUPS, GlooWorld, by_name, gloo_tests
from torch.distributed.device_mesh import DeviceMesh

import spmd_stubs as spmd
from spmd_stubs import V, _dispatch
from spmd_stubs.axes import tp


@contextmanager
def _checked_path_refused() -> Iterator[None]:
    """Any call that takes the checked path fails the check."""
    checked = _dispatch._Site.rows_bound

    def refuse(*args: Any) -> torch.Tensor:
        raise AssertionError("the call took the checked path, not the direct one")

    _dispatch._Site.rows_bound = refuse  # type: ignore[method-assign]
    try:
        yield
    finally:
        _dispatch._Site.rows_bound = checked  # type: ignore[method-assign]


def _member() -> int:
    return dist.get_rank() % 2


def without_a_gradient_it_goes_straight_to_the_group(mesh: DeviceMesh) -> None:
    spmd.bind_mesh(mesh)
    try:
        world, sends = GlooWorld(), SENDS[2]
        groups = GROUPS["tp"]
        gen = torch.Generator().manual_seed(0)
        xs = {rank: torch.randn(sum(sends[rank % 2]), WIDTH, dtype=torch.float64, generator=gen)
              for group in groups for rank in group}
        gs = {rank: torch.zeros(sum(row[rank % 2] for row in sends), WIDTH, dtype=torch.float64)
              for group in groups for rank in group}
        expected, _ = reference(groups, xs, gs)
        sent, received = sends[_member()], [row[_member()] for row in sends]
        leaf = world.make(xs).requires_grad_()
        with _checked_path_refused():
            from_lists = spmd.all_to_all(world.make(xs), tp, src=V, dst=V, input_split_sizes=sent,
                                         output_split_sizes=received)
            from_tuples = spmd.all_to_all(world.make(xs), tp, src=V, dst=V, input_split_sizes=tuple(sent),
                                          output_split_sizes=tuple(received))
            with torch.no_grad():
                unrecorded = spmd.all_to_all(leaf, tp, src=V, dst=V, input_split_sizes=sent,
                                             output_split_sizes=received)
        assert not unrecorded.requires_grad
        for y in (from_lists, from_tuples, unrecorded):
            ys = world.parts(y)
            for rank in sorted(expected):
                torch.testing.assert_close(ys[rank], expected[rank], msg=lambda m: f"rank {rank}: {m}")
    finally:
        spmd.unbind()


def counts_that_fail_a_check_get_its_error(mesh: DeviceMesh) -> None:
    """Every rank passes the same wrong counts, so every rank raises before sending."""
    spmd.bind_mesh(mesh)
    try:
        x = torch.ones(2, 3)
        wrong = [
            ([1, 1, 0], [1, 1], "input_split_sizes=[1, 1, 0], which must give one non-negative row count per rank"),
            ([1, 1], [3, -1], "output_split_sizes=[3, -1], which must give one non-negative row count per rank"),
            ([1, 2], [1, 1], "input_split_sizes=[1, 2], which send 3 rows of dim 0, but x has shape (2, 3)"),
        ]
        for sent, received, words in wrong:
            with pytest.raises(ValueError) as raised:
                spmd.all_to_all(x, tp, src=V, dst=V, input_split_sizes=sent, output_split_sizes=received)
            assert words in str(raised.value), (words, str(raised.value))
        with pytest.raises(ValueError, match="got input_split_sizes= without output_split_sizes="):
            spmd.all_to_all(x, tp, src=V, dst=V, input_split_sizes=[1, 1])
    finally:
        spmd.unbind()


CHECKS = by_name(without_a_gradient_it_goes_straight_to_the_group, counts_that_fail_a_check_get_its_error)


gloo_world, test_gloo = gloo_tests(__name__, CHECKS)
