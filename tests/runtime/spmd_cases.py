"""The table of collective test cases and the check every world runs on them.

Cases come from ``core.transitions()`` (every valid cell), widened with
shard variants, the implicit ``src=V`` of all_reduce/reduce_scatter,
``op="avg"`` and uneven ``split_sizes``.  A check runs one case on one axis:

* forward: every rank's value equals the list spec (docs/spec.md#types:
  V stacks/unbinds dim 0, S(i) concatenates/splits dim i);
* gradient type: a gradient whose type is R or I is the same on every rank;
* adjoint: ``<A*(g), x> == <g, A(x)>`` with the type-aware pairing
  (R: (sum_r g_r).x_0, I: g_0.x_0, V: sum_r g_r.x_r, P: g_0.(sum_r x_r)),
  where a value of type T is paired with a gradient of type dual(T).

Worlds (simulated or real processes) supply ``make`` (per-rank tensors -> the
rank's tensor) and ``parts`` (a tensor -> every rank's tensor).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Protocol

import torch

import spmd_stubs as spmd
from spmd_stubs import I, P, Pavg, Pmax, Pmin, R, S, V, core
from spmd_stubs.core import AxisType, Kind

Parts = dict[int, torch.Tensor]


class World(Protocol):
    def make(self, parts: Parts) -> torch.Tensor: ...

    def parts(self, t: torch.Tensor) -> Parts: ...


@dataclass(frozen=True)
class Case:
    op: str
    src: AxisType
    dst: AxisType
    expert: bool = False
    avg: bool = False
    uneven: bool = False

    @property
    def id(self) -> str:
        extra = "-avg" if self.avg else "-uneven" if self.uneven else ""
        return f"{self.op}({self.src},{self.dst}){extra}"


_SHARDS = (core.Shard(0), core.Shard(1), core.Shard(-1))


def _forms(kind: Kind) -> list[AxisType]:
    """V widens to its shard forms; the other kinds are themselves."""
    base = AxisType(kind)
    return [base, *_SHARDS] if kind is Kind.V else [base]


def cases() -> list[Case]:
    out: list[Case] = []
    for op, s, d, gated in core.transitions():
        for src in _forms(s) if op != "all_to_all" else [AxisType(s)]:
            for dst in _forms(d) if op not in ("all_to_all", "reinterpret") else [AxisType(d)]:
                out.append(Case(op, src, dst, expert=gated))
    V_, S0, S1, Sm1 = core.Varying, *_SHARDS  # noqa: N806 -- the spec's names for the types
    out += [Case("all_to_all", a, b) for a, b in [(S0, S1), (S1, S0), (Sm1, S0), (S0, S0), (S1, Sm1)]]
    out += [Case(op, V_, d) for op, d in [("all_reduce", core.Replicate), ("all_reduce", core.Invariant), ("reduce_scatter", S0)]]
    out += [Case("all_reduce", src, d, avg=True) for src in (core.Partial, V_) for d in (core.Replicate, core.Invariant)]
    out += [
        Case("all_gather", S0, core.Replicate, uneven=True),
        Case("all_gather", Sm1, core.Invariant, uneven=True),
        Case("reduce_scatter", core.Partial, S0, uneven=True),
        Case("reduce_scatter", core.Partial, S1, uneven=True),
        Case("convert", core.Invariant, S0, uneven=True),
        Case("convert", core.Replicate, Sm1, uneven=True),
        Case("convert", S1, core.Partial, expert=True, uneven=True),
    ]
    return out


def uneven_sizes(n: int) -> list[int]:
    return [1, 3] if n == 2 else [1, 3, 2, 2][:n] if n == 4 else list(range(1, n + 1))


# --------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------


def _shard_of(case: Case) -> Optional[AxisType]:
    """The shard type whose dim carries uneven parts in an uneven case."""
    return case.src if case.src.shard is not None else case.dst


def input_shape(case: Case, n: int, index: int) -> list[int]:
    """Local input shape on group member ``index``: every dim splits over n."""
    shape = [n, 2 * n, 2 * n]
    if case.uneven:
        shard = _shard_of(case)
        assert shard is not None and shard.shard is not None
        sizes = uneven_sizes(n)
        # The sharded side holds its own part; the whole side holds the sum.
        shape[shard.shard] = sizes[index] if case.src.shard is not None else sum(sizes)
    return shape


def _same_across_group(kind: Kind) -> bool:
    return kind in (Kind.R, Kind.I)


def random_parts(groups: list[list[int]], kind: Kind, shape_of: Callable[[int], list[int]], seed: int) -> Parts:
    """Per-rank values of type ``kind``: equal within a group for R/I, distinct otherwise."""
    gen = torch.Generator().manual_seed(seed)
    parts: Parts = {}
    for group in groups:
        shared = torch.randn(shape_of(0), generator=gen, dtype=torch.float64)
        for index, rank in enumerate(group):
            fresh = torch.randn(shape_of(index), generator=gen, dtype=torch.float64)
            parts[rank] = shared if _same_across_group(kind) else fresh
    return parts


# --------------------------------------------------------------------------
# The list spec
# --------------------------------------------------------------------------


def _split(t: torch.Tensor, layout: AxisType, n: int, sizes: Optional[list[int]]) -> list[torch.Tensor]:
    if layout.shard is None:
        return list(t.unbind(0))
    return list(t.split(sizes or [t.size(layout.shard) // n] * n, layout.shard))


def _join(ts: list[torch.Tensor], layout: AxisType) -> torch.Tensor:
    return torch.stack(ts) if layout.shard is None else torch.cat(ts, layout.shard)


def spec(case: Case, xs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Every group member's output, from every member's input (group order)."""
    n = len(xs)
    sizes = uneven_sizes(n) if case.uneven else None
    op, s, d = case.op, case.src.kind, case.dst.kind
    if op == "reinterpret" or (op == "convert" and {s, d} == {Kind.R, Kind.I}):
        return list(xs)
    if op == "convert" and d is Kind.V:
        return [_split(x, case.dst, n, sizes)[k] for k, x in enumerate(xs)]
    if op == "convert" and s is Kind.V:
        return [_join([x if j == k else torch.zeros_like(p) for j, p in enumerate(_zero_parts(x, case.src, n, sizes))], case.src) for k, x in enumerate(xs)]
    if op == "convert":
        return [x if k == 0 else torch.zeros_like(x) for k, x in enumerate(xs)]
    if op == "all_reduce":
        total = sum(xs) / (n if case.avg else 1)
        return [total] * n
    if op == "all_gather":
        return [_join(list(xs), case.src)] * n
    if op == "reduce_scatter":
        return _split(sum(xs), case.dst, n, sizes)
    # all_to_all: member k receives part k of every member, joined in member order.
    return [_join([_split(x, case.dst, n, None)[k] for x in xs], case.src) for k in range(n)]


def _zero_parts(x: torch.Tensor, layout: AxisType, n: int, sizes: Optional[list[int]]) -> list[torch.Tensor]:
    """Shapes of the parts of a whole whose member part is ``x`` (zeros)."""
    if layout.shard is None:
        return [torch.zeros_like(x)] * n
    out = []
    for size in sizes or [x.size(layout.shard)] * n:
        shape = list(x.shape)
        shape[layout.shard] = size
        out.append(x.new_zeros(shape))
    return out


# --------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------


def _as_arg(t: AxisType) -> object:
    if t.shard is not None:
        return S(t.shard)
    if t.kind is Kind.P:
        return {"sum": P, "avg": Pavg, "max": Pmax, "min": Pmin}[t.reduce]
    return {Kind.R: R, Kind.I: I, Kind.V: V}[t.kind]


def call(case: Case, x: torch.Tensor, axis: object, n: int) -> torch.Tensor:
    """The public call the case describes."""
    kwargs: dict[str, object] = {"src": _as_arg(case.src), "dst": _as_arg(case.dst)}
    if case.op in core.CASTS:
        kwargs["expert_mode"] = case.expert
    if case.avg:
        kwargs["op"] = "avg"
    if case.uneven:
        kwargs["split_sizes"] = uneven_sizes(n)
    return getattr(spmd, case.op)(x, axis, **kwargs)


def _pair(kind: Kind, grads: list[torch.Tensor], values: list[torch.Tensor]) -> torch.Tensor:
    """<grad, value> for a value of type ``kind`` on one group (grad of type dual)."""
    dot = lambda a, b: (a * b).sum()  # noqa: E731
    if kind is Kind.R:
        return dot(sum(grads), values[0])
    if kind is Kind.I:
        return dot(grads[0], values[0])
    if kind is Kind.V:
        return sum(dot(g, v) for g, v in zip(grads, values))
    return dot(grads[0], sum(values))


def check(
    world: World,
    case: Case,
    axis: object,
    groups: list[list[int]],
    seed: int = 0,
    fn: Optional[Callable[[torch.Tensor], torch.Tensor]] = None,
) -> None:
    """Run ``case`` on ``axis`` (whose groups are ``groups``) and assert all three properties.

    ``fn`` replaces the public call the case describes (a helper claimed to be it).
    """
    n = len(groups[0])
    xs = random_parts(groups, case.src.kind, lambda k: input_shape(case, n, k), seed)
    x = world.make(xs).requires_grad_()
    y = fn(x) if fn is not None else call(case, x, axis, n)
    ys = world.parts(y)
    expected = {rank: out for g in groups for rank, out in zip(g, spec(case, [xs[r] for r in g]))}
    for rank in sorted(expected):
        torch.testing.assert_close(ys[rank], expected[rank], msg=lambda m: f"forward on rank {rank}: {m}")
    grad_kind = core.dual(case.dst).kind
    gs = random_parts(groups, grad_kind, lambda k: list(expected[groups[0][k]].shape), seed + 1)
    y.backward(world.make(gs))
    dxs = world.parts(x.grad)
    if _same_across_group(core.dual(case.src).kind):
        for g in groups:
            for rank in g:
                torch.testing.assert_close(dxs[rank], dxs[g[0]], msg=lambda m: f"gradient not the same on rank {rank}: {m}")
    for g in groups:
        lhs = _pair(case.dst.kind, [gs[r] for r in g], [ys[r].detach() for r in g])
        rhs = _pair(case.src.kind, [dxs[r] for r in g], [xs[r] for r in g])
        torch.testing.assert_close(lhs, rhs, msg=lambda m: f"adjoint identity fails on group {g}: {m}")


def in_place_cases() -> list[Case]:
    """The cases ``all_reduce_`` takes: every all_reduce case (sum, avg, src=V), and pending avg/max/min."""
    pending = [Case("all_reduce", core.parse_axis_type(src), core.Replicate) for src in ("Pavg", "Pmax", "Pmin")]
    return [case for case in cases() if case.op == "all_reduce"] + pending


def check_in_place(world: World, case: Case, axis: object, groups: list[list[int]], seed: int = 0) -> None:
    """``all_reduce_`` writes the out-of-place call's values over ``x`` itself.

    On a contiguous ``x`` (a view of it sees the values) and on a transposed,
    non-contiguous one; and it refuses an ``x`` that autograd would record.
    """
    n = len(groups[0])
    xs = random_parts(groups, case.src.kind, lambda k: input_shape(case, n, k), seed)
    in_place = Case("all_reduce_", case.src, case.dst, avg=case.avg)
    for layout in (lambda t: t, lambda t: t.transpose(0, 1)):
        expected = world.parts(call(case, layout(world.make(xs)), axis, n))
        x = layout(world.make(xs))
        flat_view = x.view(-1) if x.is_contiguous() else None
        y = call(in_place, x, axis, n)
        assert y is x, "all_reduce_ returns its input"
        got = world.parts(x)
        for rank in sorted(expected):
            torch.testing.assert_close(got[rank], expected[rank], msg=lambda m: f"in place, rank {rank}: {m}")
        if flat_view is not None:
            views = world.parts(flat_view)
            for rank in sorted(expected):
                torch.testing.assert_close(views[rank], expected[rank].reshape(-1))
    recorded = world.make(xs).requires_grad_()
    try:
        call(in_place, recorded, axis, n)
    except ValueError as error:
        assert "requires a gradient" in str(error), error
        assert "src=" in str(error) and "Fix: y = all_reduce(x, " in str(error), error
    else:
        raise AssertionError("all_reduce_ accepted a tensor that requires a gradient")
