"""The uneven all-to-all (a mixture of experts' token dispatch) against a one-process reference.

Member ``i`` of a group sends member ``k`` ``SENDS[n][i][k]`` rows (zeros
included, and on 2 ranks a member that sends nothing at all).  As a
dispatcher does, each rank exchanges its counts first (a typed
``all_to_all(V, V)`` of integers) and passes what it received as
``output_split_sizes``.  The reference computes every rank's result and
gradients in one process with ``torch.split``/``torch.cat``; the world's
forward values and input gradients must equal it.
"""

from __future__ import annotations

import torch
from spmd_cases import Parts, World

import spmd_stubs as spmd
from spmd_stubs import V

SENDS = {
    2: [[1, 3], [0, 0]],
    4: [[0, 2, 0, 2], [1, 0, 3, 2], [2, 2, 2, 2], [3, 0, 1, 2]],
}
"""Group size -> rows member i sends member k."""

WIDTH = 3


def _rows(groups: list[list[int]], seed: int, rows_of: dict[int, int]) -> Parts:
    gen = torch.Generator().manual_seed(seed)
    return {rank: torch.randn(rows_of[rank], WIDTH, generator=gen, dtype=torch.float64)
            for group in groups for rank in group}


def reference(groups: list[list[int]], xs: Parts, gs: Parts) -> tuple[Parts, Parts]:
    """Every rank's result and input gradient (``gs``: the result's gradient), in one process."""
    leaves = {rank: x.clone().requires_grad_() for rank, x in xs.items()}
    ys: Parts = {}
    for group in groups:
        sends = SENDS[len(group)]
        parts = [leaves[rank].split(sends[i]) for i, rank in enumerate(group)]
        for k, rank in enumerate(group):
            ys[rank] = torch.cat([parts[j][k] for j in range(len(group))])
    torch.autograd.backward([ys[rank] for rank in ys], [gs[rank] for rank in ys])
    return {rank: y.detach() for rank, y in ys.items()}, {rank: leaf.grad for rank, leaf in leaves.items()}


def check_exchange(world: World, axis: object, groups: list[list[int]], seed: int = 0) -> None:
    """Counts exchanged, then rows: forward and backward equal the reference on every rank."""
    n = len(groups[0])
    sends = SENDS[n]
    index = {rank: i for group in groups for i, rank in enumerate(group)}
    counts = world.make({rank: torch.tensor(sends[i]) for rank, i in index.items()})
    received = spmd.all_to_all(counts, axis, src=V, dst=V)
    columns = world.parts(received)
    for rank, i in index.items():
        assert columns[rank].tolist() == [sends[j][i] for j in range(n)], (rank, columns[rank])
    xs = _rows(groups, seed, {rank: sum(sends[i]) for rank, i in index.items()})
    gs = _rows(groups, seed + 1, {rank: sum(row[i] for row in sends) for rank, i in index.items()})
    expected, expected_grads = reference(groups, xs, gs)
    x = world.make(xs).requires_grad_()
    y = spmd.all_to_all(x, axis, src=V, dst=V, input_split_sizes=counts.tolist(),
                        output_split_sizes=received.tolist())
    ys = world.parts(y)
    for rank in sorted(expected):
        torch.testing.assert_close(ys[rank], expected[rank], msg=lambda m: f"forward on rank {rank}: {m}")
    y.backward(world.make(gs))
    grads = world.parts(x.grad)
    for rank in sorted(expected_grads):
        torch.testing.assert_close(grads[rank], expected_grads[rank], msg=lambda m: f"gradient on rank {rank}: {m}")
