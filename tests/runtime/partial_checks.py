"""Checks of the pending avg/max/min collectives, run by the simulated and the gloo world.

Every check compares the per-rank values and gradients with plain autograd
of the global meaning on one process: a pending max of parts ``x_r`` means
``torch.amax(torch.stack(parts), 0)``, a pending avg ``mean``.  Parts are
drawn from a few small integers, so ranks tie often and the tie-splitting of
the gradient is exercised (torch.amax splits a gradient evenly among ties).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Optional

import torch
from spmd_cases import Parts, World

import spmd_stubs as spmd
from spmd_stubs import I, Pavg, Pmax, Pmin, R, S, V, core

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import vocab_parallel_softmax

PENDING = {"avg": Pavg, "max": Pmax, "min": Pmin}
REDUCE: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "avg": lambda t: t.mean(0),
    "max": lambda t: torch.amax(t, 0),
    "min": lambda t: torch.amin(t, 0),
}
SHAPE = [4, 8]


def tied_parts(groups: list[list[int]], shape: list[int], seed: int, same: bool = False) -> Parts:
    """Per-rank float64 parts from {0, 1, 2}: many ties across ranks (equal within a group if ``same``)."""
    gen = torch.Generator().manual_seed(seed)
    parts: Parts = {}
    for group in groups:
        shared = torch.randint(0, 3, shape, generator=gen).double()
        for rank in group:
            parts[rank] = shared if same else torch.randint(0, 3, shape, generator=gen).double()
    return parts


def random_parts(groups: list[list[int]], shape: list[int], seed: int, same: bool = False) -> Parts:
    gen = torch.Generator().manual_seed(seed)
    parts: Parts = {}
    for group in groups:
        shared = torch.randn(shape, generator=gen, dtype=torch.float64)
        for rank in group:
            parts[rank] = shared if same else torch.randn(shape, generator=gen, dtype=torch.float64)
    return parts


def _close(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(got, want, msg=lambda m: f"{what}: {m}")


def _split(t: torch.Tensor, layout: core.AxisType, n: int, sizes: Optional[list[int]]) -> list[torch.Tensor]:
    if layout.shard is None:
        return list(t.unbind(0))
    return list(t.split(sizes or t.size(layout.shard) // n, layout.shard))


def _join(ts: list[torch.Tensor], layout: core.AxisType) -> torch.Tensor:
    return torch.stack(ts) if layout.shard is None else torch.cat(ts, layout.shard)


def check_resolve(
    world: World,
    op: str,
    reduce: str,
    dst: object,
    axis: object,
    groups: list[list[int]],
    seed: int = 0,
    split_sizes: Optional[list[int]] = None,
) -> None:
    """``op(x, axis, src=P<reduce>, dst=dst)``: values and gradients against the global meaning."""
    dst_type = core.Shard(dst.dim) if isinstance(dst, S) else dst.spmd_type  # type: ignore[attr-defined]
    n = len(groups[0])
    shape = [n, 8] if op == "reduce_scatter" and dst_type.shard is None else SHAPE
    if split_sizes is not None:
        shape = [sum(split_sizes), 8]
    xs = tied_parts(groups, shape, seed)
    x = world.make(xs).requires_grad_()
    kwargs = {"split_sizes": split_sizes} if split_sizes is not None else {}
    y = getattr(spmd, op)(x, axis, src=PENDING[reduce], dst=dst, **kwargs)
    ys = world.parts(y)
    # The output gradient: R's is a pending sum (differs per rank), I's is the
    # same on every rank, a shard's is each rank's part.
    grad_kind = core.dual(dst_type).kind
    if op == "all_reduce":
        gs = random_parts(groups, list(ys[groups[0][0]].shape), seed + 1, same=grad_kind is core.Kind.I)
    else:
        gen = torch.Generator().manual_seed(seed + 1)
        gs = {rank: torch.randn(list(ys[rank].shape), generator=gen, dtype=torch.float64) for rank in sorted(ys)}
    y.backward(world.make(gs))
    dxs = world.parts(x.grad)
    for g in groups:
        whole = torch.stack([xs[r] for r in g]).requires_grad_()
        reduced = REDUCE[reduce](whole)
        if op == "all_reduce":
            for rank in g:
                _close(ys[rank], reduced.detach(), f"forward on rank {rank}")
            out_grad = sum(gs[r] for r in g) if grad_kind is core.Kind.P else gs[g[0]]
        else:
            for k, rank in enumerate(g):
                _close(ys[rank], _split(reduced.detach(), dst_type, n, split_sizes)[k], f"forward on rank {rank}")
            out_grad = _join([gs[r] for r in g], dst_type)
        reduced.backward(out_grad)
        assert whole.grad is not None
        for k, rank in enumerate(g):
            _close(dxs[rank], whole.grad[k], f"gradient on rank {rank}")


def check_make(world: World, op: str, reduce: str, axis: object, groups: list[list[int]], seed: int = 0) -> None:
    """``convert(R, P<reduce>)`` / ``reinterpret(V, P<reduce>)`` keep the values; resolving gives the meaning."""
    src = R if op == "convert" else V
    xs = tied_parts(groups, SHAPE, seed, same=op == "convert")
    x = world.make(xs).requires_grad_()
    pending = getattr(spmd, op)(x, axis, src=src, dst=PENDING[reduce])
    ps = world.parts(pending)
    for rank in xs:
        _close(ps[rank], xs[rank], f"{op} keeps rank {rank}'s value")
    y = spmd.all_reduce(pending, axis, src=PENDING[reduce], dst=I)
    gs = random_parts(groups, SHAPE, seed + 1, same=True)
    y.backward(world.make(gs))
    ys, dxs = world.parts(y), world.parts(x.grad)
    for g in groups:
        whole = torch.stack([xs[r] for r in g]).requires_grad_()
        reduced = REDUCE[reduce](whole)
        reduced.backward(gs[g[0]])
        assert whole.grad is not None
        for k, rank in enumerate(g):
            _close(ys[rank], reduced.detach(), f"resolved value on rank {rank}")
            _close(dxs[rank], whole.grad[k], f"gradient on rank {rank}")
        if op == "convert":
            # The R input's gradient is a pending sum: it adds up to the whole gradient.
            _close(sum(dxs[r] for r in g), gs[g[0]], "convert(R,P...)'s gradient summed over the group")


def check_softmax(world: World, axis: object, groups: list[list[int]], log: bool, seed: int = 0) -> None:
    """The vocab-parallel (log-)softmax equals the single-device one, values and gradients."""
    n = len(groups[0])
    gen = torch.Generator().manual_seed(seed)
    rows, vocab = 3, 4 * n
    fulls = {tuple(g): torch.randn(rows, vocab, generator=gen, dtype=torch.float64) * 3 for g in groups}
    weights = {tuple(g): torch.randn(rows, vocab, generator=gen, dtype=torch.float64) for g in groups}
    # Ties across ranks in the max: a row whose largest logit appears on two slices.
    for g in groups:
        full = fulls[tuple(g)]
        full[0, 1] = full[0, vocab - 1] = full[0].abs().max() + 1
    xs = {r: fulls[tuple(g)].chunk(n, -1)[k].clone() for g in groups for k, r in enumerate(g)}
    ws = {r: weights[tuple(g)].chunk(n, -1)[k].clone() for g in groups for k, r in enumerate(g)}
    x = world.make(xs).requires_grad_()
    fn = vocab_parallel_softmax.vocab_parallel_log_softmax if log else vocab_parallel_softmax.vocab_parallel_softmax
    y = fn(x)
    # Each rank's loss term: together a pending sum over the axis, seeded 1.0 per rank.
    (y * world.make(ws)).sum().backward()
    ys, dxs = world.parts(y), world.parts(x.grad)
    for g in groups:
        full = fulls[tuple(g)].clone().requires_grad_()
        ref = torch.log_softmax(full, -1) if log else torch.softmax(full, -1)
        (ref * weights[tuple(g)]).sum().backward()
        assert full.grad is not None
        for k, rank in enumerate(g):
            _close(ys[rank], ref.detach().chunk(n, -1)[k], f"value on rank {rank}")
            _close(dxs[rank], full.grad.chunk(n, -1)[k], f"gradient on rank {rank}")


def check_double_backward(world: World, axis: object, groups: list[list[int]], seed: int = 0) -> None:
    """The backward of all_reduce(Pmax, R) is differentiable: grad of (grad . w) matches autograd."""
    xs = tied_parts(groups, SHAPE, seed)
    x = world.make(xs).requires_grad_()
    y = spmd.all_reduce(x, axis, src=Pmax, dst=I)
    gs = random_parts(groups, SHAPE, seed + 1, same=True)
    g = world.make(gs).requires_grad_()
    (dx,) = torch.autograd.grad(y, x, g, create_graph=True)
    ws = random_parts(groups, SHAPE, seed + 2)
    (dg,) = torch.autograd.grad((dx * world.make(ws)).sum(), g)
    dgs = world.parts(dg)
    for grp in groups:
        whole = torch.stack([xs[r] for r in grp]).requires_grad_()
        gg = gs[grp[0]].clone().requires_grad_()
        (d,) = torch.autograd.grad(torch.amax(whole, 0), whole, gg, create_graph=True)
        (want,) = torch.autograd.grad((d * torch.stack([ws[r] for r in grp])).sum(), gg)
        # g is I: the identity that passes it on has an all-reduce backward, so each
        # rank gets the whole gradient of the ranks' (pending-sum) loss terms.
        for rank in grp:
            _close(dgs[rank], want, f"gradient of the gradient on rank {rank}")
