"""``redistribute(x, src_spec, dst_spec)`` against the naive per-axis route, simulated and on 4 gloo ranks.

For every example of :data:`spmd_stubs.planner.EXAMPLES` on the 2 dp x 2 tp
mesh (those naming only dp and tp):

* the planned call and the naive route (one per-axis ``redistribute(x, axis,
  src=, dst=)`` per step of ``planner.naive_plan``) give the same tensor on
  every rank, and the same gradient on every rank for the same output
  gradient (any per-rank tensors of the dual type);
* the result denotes the input's global value under ``dst`` (an independent
  reading of the spec: blocks of each sharded dim, major axis first, pending
  reductions resolved, replicas equal);
* the plan has no more steps and no more collectives than the naive route.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import pytest
import torch
from spmd_cases import Parts, World
from spmd_world import MESH_DIMS, Check, GlooWorld, SimWorld, gloo_tests
from torch.distributed.device_mesh import DeviceMesh

import spmd_stubs as spmd
from spmd_stubs import I, P, Pavg, Pmax, Pmin, R, S, core
from spmd_stubs.axes import cp, dp, tp
from spmd_stubs.core import AxisType, Code, Kind, SpmdTypeError, TensorType, planner

AXES: dict[str, Any] = {"dp": dp, "tp": tp}
SIZES = {"dp": 2, "tp": 2}
SHAPE = (4, 4)
EXAMPLES = [
    (a, b)
    for a, b in planner.EXAMPLES
    if {axis for text in (a, b) for axis, _ in TensorType.parse(text).axes} <= set(AXES)
]
IDS = [f"{a} -> {b}" for a, b in EXAMPLES]
_KINDS = {Kind.R: R, Kind.I: I}
_PARTIALS = {"sum": P, "avg": Pavg, "max": Pmax, "min": Pmin}


def coords(rank: int) -> dict[str, int]:
    """Row-major 2 x 2 mesh: rank = 2 * dp + tp."""
    return dict(zip(MESH_DIMS, divmod(rank, 2)))


def type_arg(t: AxisType) -> Any:
    """The public src=/dst= value of a per-axis type."""
    if t.shard is not None:
        return S(t.shard)
    return _PARTIALS[t.reduce] if t.kind is Kind.P else _KINDS[t.kind]


def annotations(spec: TensorType) -> tuple[Any, ...]:
    """The ``TYPE@axis`` tuple a user writes for ``spec`` (a dim's shard axes as one group)."""
    out, grouped = [], set()
    for axis, t in spec.axes:
        if t.shard is None:
            out.append(type_arg(t) @ AXES[axis])
        elif t.shard not in grouped:
            grouped.add(t.shard)
            sharding = tuple(AXES[a] for a in spec.shard_axes(t.shard))
            out.append(S(t.shard) @ (sharding if len(sharding) > 1 else sharding[0]))
    return tuple(out)


# --------------------------------------------------------------------------
# Per-rank tensors of a spec, and what they denote
# --------------------------------------------------------------------------


def _replicated(spec: TensorType) -> list[str]:
    return [axis for axis, t in spec.axes if t.kind in (Kind.R, Kind.I)]


def _blocks(spec: TensorType, rank: int) -> dict[int, tuple[int, int]]:
    """dim -> (this rank's block, number of blocks), major axis first."""
    out = {}
    for dim in {t.shard for _, t in spec.axes if t.shard is not None}:
        index, count = 0, 1
        for axis in spec.shard_axes(dim):
            index, count = index * SIZES[axis] + coords(rank)[axis], count * SIZES[axis]
        out[dim] = (index, count)
    return out


def _members(rank: int, axis: str) -> list[int]:
    return [r for r in range(4) if all(coords(r)[a] == coords(rank)[a] for a in AXES if a != axis)]


def distribute(value: torch.Tensor, spec: TensorType, gen: torch.Generator) -> Parts:
    """Per-rank tensors of type ``spec`` denoting ``value``, each pending reduction split at random."""
    parts: Parts = {}
    for rank in range(4):
        local = value
        for dim, (block, count) in _blocks(spec, rank).items():
            local = local.chunk(count, dim)[block]
        parts[rank] = local.clone()
    same = _replicated(spec)
    for axis, t in spec.axes:
        if t.kind is not Kind.P:
            continue
        for rank in range(4):
            if coords(rank)[axis] or any(coords(rank)[a] for a in same):
                continue  # drawn on one replica, copied below
            members, whole = _members(rank, axis), parts[rank]
            noise = [torch.randn(whole.shape, generator=gen, dtype=whole.dtype) for _ in members[1:]]
            if t.reduce in ("sum", "avg"):
                scale = len(members) if t.reduce == "avg" else 1
                split = [*noise, scale * whole - sum(noise)]
            else:
                sign = -1 if t.reduce == "max" else 1
                split = [whole + sign * n.abs() for n in noise] + [whole]
            parts.update(zip(members, split))
    return {r: parts[_replica(r, same)] for r in range(4)}


def _replica(rank: int, same: list[str]) -> int:
    c = {a: (0 if a in same else i) for a, i in coords(rank).items()}
    return 2 * c["dp"] + c["tp"]


_REDUCE: dict[str, Callable[[list[torch.Tensor]], torch.Tensor]] = {
    "sum": lambda xs: torch.stack(xs).sum(0),
    "avg": lambda xs: torch.stack(xs).mean(0),
    "max": lambda xs: torch.stack(xs).amax(0),
    "min": lambda xs: torch.stack(xs).amin(0),
}


def denote(parts: Parts, spec: TensorType) -> torch.Tensor:
    """The global value of per-rank tensors of type ``spec``; asserts replicas agree."""
    same = _replicated(spec)
    for rank in range(4):
        for axis in same:
            for member in _members(rank, axis):
                torch.testing.assert_close(parts[member], parts[rank], msg=lambda m: f"not replicated on {axis}: {m}")
    resolved = dict(parts)
    for axis, t in spec.axes:
        if t.kind is Kind.P:
            resolved = {r: _REDUCE[t.reduce]([resolved[m] for m in _members(r, axis)]) for r in range(4)}
    value = torch.zeros(SHAPE, dtype=torch.float64)
    for rank in range(4):
        if any(coords(rank)[a] for a, t in spec.axes if t.kind is not Kind.V):
            continue
        where = [slice(None)] * len(SHAPE)
        for dim, (block, count) in _blocks(spec, rank).items():
            size = SHAPE[dim] // count
            where[dim] = slice(block * size, (block + 1) * size)
        value[tuple(where)] = resolved[rank]
    return value


def any_parts(spec: TensorType, shape_of: Callable[[int], torch.Size], gen: torch.Generator) -> Parts:
    """Per-rank tensors of type ``spec`` with no value in mind: equal across R/I axes, free elsewhere."""
    same = _replicated(spec)
    fresh = {r: torch.randn(shape_of(r), generator=gen, dtype=torch.float64) for r in range(4)}
    return {r: fresh[_replica(r, same)] for r in range(4)}


def dual(spec: TensorType) -> TensorType:
    return TensorType(tuple((axis, core.dual(t)) for axis, t in spec.axes))


# --------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------


def naive(x: torch.Tensor, src: TensorType, dst: TensorType) -> torch.Tensor:
    """The naive route through the public per-axis redistribute, one axis per call."""
    for step in planner.naive_plan(src, dst, ndim=x.dim(), mesh_order=MESH_DIMS):
        (axis,) = step.axes
        x = spmd.redistribute(x, AXES[axis], src=type_arg(step.src), dst=type_arg(step.dst))
    return x


def check(world: World, src_text: str, dst_text: str, seed: int = 0) -> None:
    src, dst = TensorType.parse(src_text), TensorType.parse(dst_text)
    plan = planner.plan(src, dst, sizes=SIZES, ndim=len(SHAPE), mesh_order=MESH_DIMS)
    route = planner.naive_plan(src, dst, ndim=len(SHAPE), mesh_order=MESH_DIMS)
    assert len(plan) <= len(route), (plan, route)
    assert planner.collective_count(plan) <= planner.collective_count(route)

    gen = torch.Generator().manual_seed(seed)
    value = torch.randn(SHAPE, generator=gen, dtype=torch.float64)
    xs = distribute(value, src, gen)
    torch.testing.assert_close(denote(xs, src), value)
    x_plan, x_naive = world.make(xs).requires_grad_(), world.make(xs).requires_grad_()
    y_plan = spmd.redistribute(x_plan, annotations(src), annotations(dst))
    y_naive = naive(x_naive, src, dst)

    planned, expected = world.parts(y_plan), world.parts(y_naive)
    for rank in range(4):
        torch.testing.assert_close(planned[rank], expected[rank], msg=lambda m: f"value on rank {rank}: {m}")
    torch.testing.assert_close(denote(planned, dst), value, msg=lambda m: f"the result's meaning: {m}")

    gs = any_parts(dual(dst), lambda r: expected[r].shape, gen)
    y_plan.backward(world.make(gs))
    y_naive.backward(world.make(gs))
    grad_plan, grad_naive = world.parts(x_plan.grad), world.parts(x_naive.grad)
    for rank in range(4):
        torch.testing.assert_close(grad_plan[rank], grad_naive[rank], msg=lambda m: f"gradient on rank {rank}: {m}")


@pytest.mark.parametrize(("src", "dst"), EXAMPLES, ids=IDS)
def test_simulated(sim: SimWorld, src: str, dst: str) -> None:
    check(sim, src, dst)


def test_the_examples_cover_the_mesh() -> None:
    assert len(EXAMPLES) >= 20


# --------------------------------------------------------------------------
# Misuse, simulated
# --------------------------------------------------------------------------


def test_the_per_axis_form_is_unchanged(sim: SimWorld) -> None:
    x = sim.make({r: torch.full((2,), float(r)) for r in range(4)})
    total = sim.parts(spmd.redistribute(x, tp, src=P, dst=R))
    assert total[0].tolist() == [1.0, 1.0] and total[2].tolist() == [5.0, 5.0]
    flat = sim.parts(spmd.redistribute(x, (dp, tp), src=P, dst=R))
    assert all(t.tolist() == [6.0, 6.0] for t in flat.values())


def test_nothing_to_do_returns_the_input(sim: SimWorld) -> None:
    x = sim.make({r: torch.zeros(4, 4) for r in range(4)})
    assert spmd.redistribute(x, (S(0) @ (dp, tp),), (S(0) @ (dp, tp),)) is x
    assert spmd.redistribute(x, (S(-1) @ tp,), (S(1) @ tp,)) is x  # the same dim of a 2-d tensor


def _spec_error(fn: Callable[[], object]) -> SpmdTypeError:
    with pytest.raises(SpmdTypeError) as info:
        fn()
    assert info.value.code is Code.COLLECTIVE and "Fix" in str(info.value)
    return info.value


def test_invalid_specs(sim: SimWorld) -> None:
    x = sim.make({r: torch.zeros(4, 4) for r in range(4)})
    error = _spec_error(lambda: spmd.redistribute(x, (spmd.V @ dp, S(0) @ tp), (spmd.V @ dp, R @ tp)))
    assert "V@dp" in str(error)
    error = _spec_error(lambda: spmd.redistribute(x, (S(0) @ tp, R @ tp), (R @ tp,)))
    assert "src: axis tp is given twice (S(0)@tp and R@tp)" in str(error)
    error = _spec_error(lambda: spmd.redistribute(x, (P @ dp, S(0) @ tp), (R @ tp,)))
    assert "src names axis dp" in str(error)
    error = _spec_error(lambda: spmd.redistribute(x, (S(2) @ tp,), (R @ tp,)))
    assert "the tensor has 2 dims" in str(error)
    error = _spec_error(lambda: spmd.redistribute(x, (Pmax @ dp, P @ tp), (R @ dp, R @ tp)))
    assert "do not commute" in str(error)


def test_misused_arguments(sim: SimWorld) -> None:
    x = sim.make({r: torch.zeros(4, 4) for r in range(4)})
    with pytest.raises(TypeError, match="takes the two partition specs only"):
        spmd.redistribute(x, (S(0) @ tp,), (R @ tp,), src=R)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="TYPE@axis entries"):
        spmd.redistribute(x, (S(0) @ tp,), (R,))  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="must be a tuple"):
        spmd.redistribute(x, (S(0) @ tp,), R @ tp)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="needs both src and dst"):
        spmd.redistribute(x, tp, src=R)  # type: ignore[call-overload]


def test_an_unbound_axis_is_named(sim: SimWorld) -> None:
    x = sim.make({r: torch.zeros(4, 4) for r in range(4)})
    with pytest.raises(LookupError, match="cp is not bound"):
        spmd.redistribute(x, (S(0) @ (dp, cp),), (R @ dp, R @ cp))


# --------------------------------------------------------------------------
# Real ranks: one gloo world runs every example (CHECKS)
# --------------------------------------------------------------------------


def _gloo_check(src: str, dst: str, mesh: DeviceMesh) -> None:
    spmd.bind_mesh(mesh)
    try:
        check(GlooWorld(), src, dst)
    finally:
        spmd.unbind()


def _groups_check(mesh: DeviceMesh) -> None:
    """Axes bound to explicit groups (no DeviceMesh): flattened tuples in any order, built by exchange."""
    spmd.bind_groups({dp: mesh.get_group("dp"), tp: mesh.get_group("tp")})
    try:
        for src, dst in [("P@dp, P@tp", "S(0)@(tp,dp)"), ("S(0)@(dp,tp)", "S(0)@(tp,dp)")]:
            steps = planner.plan(TensorType.parse(src), TensorType.parse(dst), sizes=SIZES, ndim=2)
            assert any(step.axes == ("tp", "dp") for step in steps), steps
            check(GlooWorld(), src, dst, seed=1)
    finally:
        spmd.unbind()


CHECKS: dict[str, Check] = {
    **{f"{a} -> {b}": functools.partial(_gloo_check, a, b) for a, b in EXAMPLES},
    "explicit groups, tp-major flattening": _groups_check,
}


gloo_world, test_gloo = gloo_tests(__name__, CHECKS)

