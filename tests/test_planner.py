"""The partition-spec redistribute planner (spmd_stubs.planner), without torch.

Plans are checked three ways:

* structurally: each step is a valid transition of the algebra, steps chain
  (one's ``after`` is the next one's ``before``), a step leaving a dim takes
  that dim's minor axes, the last ``after`` is ``dst``, and the plan has no
  more collectives and no more steps than the naive per-axis route;
* semantically, by a numpy simulation of every rank of a mesh (independent of
  the planner's own bookkeeping): each step runs as its collective or cast on
  the flattened group (first axis major), and the final per-rank tensors must
  denote the source's global value under ``dst`` and equal the naive route's
  on every rank;
* on the examples' expected flattened steps, and the errors.
"""

from __future__ import annotations

import itertools
import random
from typing import Callable, Sequence

import numpy as np
import pytest

from spmd_stubs import core
from spmd_stubs.core import AxisType, Code, Kind, SpmdTypeError, TensorType, planner
from spmd_stubs.core.planner import PlannedStep

MESH = {"dp": 2, "cp": 3, "tp": 2}
MESH_ORDER = ("dp", "cp", "tp")
EXAMPLES = [(TensorType.parse(a), TensorType.parse(b)) for a, b in planner.EXAMPLES]
IDS = [f"{a} -> {b}" for a, b in planner.EXAMPLES]


def tt(text: str) -> TensorType:
    return TensorType.parse(text)


# --------------------------------------------------------------------------
# A numpy simulation of every rank
# --------------------------------------------------------------------------

Coord = tuple[tuple[str, int], ...]
World = dict[Coord, np.ndarray]
_REDUCE: dict[str, Callable[[list[np.ndarray]], np.ndarray]] = {
    "sum": lambda xs: np.sum(xs, axis=0),
    "avg": lambda xs: np.mean(xs, axis=0),
    "max": lambda xs: np.max(xs, axis=0),
    "min": lambda xs: np.min(xs, axis=0),
}


def ranks(axes: Sequence[str]) -> list[Coord]:
    return [tuple(zip(axes, c)) for c in itertools.product(*(range(MESH[a]) for a in axes))]


def group(rank: Coord, axes: Sequence[str]) -> list[Coord]:
    """The members of ``rank``'s flattened group over ``axes``, first axis major."""
    coords = dict(rank)
    out = []
    for index in itertools.product(*(range(MESH[a]) for a in axes)):
        member = dict(coords, **dict(zip(axes, index)))
        out.append(tuple((a, member[a]) for a, _ in rank))
    return out


def run_step(world: World, step: PlannedStep) -> World:
    """One step on every rank, by its list specification (docs/spec.md#global-spmd)."""
    out: World = {}
    for rank in world:
        members = group(rank, step.axes)
        k, n = members.index(rank), len(members)
        xs = [world[m] for m in members]
        src, dst, op = step.src, step.dst, step.op
        if op == "all_reduce":
            out[rank] = _REDUCE[src.reduce](xs)
        elif op == "all_gather":
            out[rank] = np.concatenate(xs, axis=src.shard)
        elif op == "reduce_scatter":
            out[rank] = np.split(_REDUCE[src.reduce](xs), n, axis=dst.shard)[k]
        elif op == "all_to_all":
            out[rank] = np.concatenate([np.split(x, n, axis=dst.shard)[k] for x in xs], axis=src.shard)
        elif op == "convert" and dst.shard is not None:
            out[rank] = np.split(xs[k], n, axis=dst.shard)[k]
        elif op == "convert" and src.shard is not None:  # zero-pad into a pending sum
            parts = [xs[k] if j == k else np.zeros_like(xs[k]) for j in range(n)]
            out[rank] = np.concatenate(parts, axis=src.shard)
        elif op == "convert" and dst.kind is Kind.P and dst.reduce == "sum":
            out[rank] = xs[k] if k == 0 else np.zeros_like(xs[k])
        elif op in ("convert", "reinterpret"):
            out[rank] = xs[k]
        else:  # pragma: no cover
            raise AssertionError(step)
    return out


def run(world: World, steps: Sequence[PlannedStep]) -> World:
    for step in steps:
        world = run_step(world, step)
    return world


def _block(spec: TensorType, rank: Coord) -> dict[int, tuple[int, int]]:
    """dim -> (index of this rank's block, number of blocks)."""
    coords = dict(rank)
    out = {}
    for dim in {t.shard for _, t in spec.axes if t.shard is not None}:
        index, count = 0, 1
        for axis in spec.shard_axes(dim):
            index, count = index * MESH[axis] + coords[axis], count * MESH[axis]
        out[dim] = (index, count)
    return out


def distribute(value: np.ndarray, spec: TensorType, rng: np.random.Generator) -> World:
    """Per-rank tensors of type ``spec`` denoting ``value`` (random parts of each pending reduction)."""
    axes = [a for a, _ in spec.axes]
    world: World = {}
    for rank in ranks(axes):
        local = value
        for dim, (index, count) in _block(spec, rank).items():
            local = np.split(local, count, axis=dim)[index]
        world[rank] = local.copy()
    same = [a for a, t in spec.axes if t.kind in (Kind.R, Kind.I)]
    for axis, t in spec.axes:
        if t.kind is not Kind.P:
            continue
        for rank in world:
            if dict(rank)[axis] != 0 or any(dict(rank)[a] for a in same):
                continue  # parts are drawn on one replica and copied below
            members = group(rank, (axis,))
            whole = world[rank]
            noise = [rng.standard_normal(whole.shape) for _ in members]
            if t.reduce == "sum":
                parts = [*noise[1:], whole - sum(noise[1:])]
            elif t.reduce == "avg":
                parts = [*noise[1:], len(members) * whole - sum(noise[1:])]
            else:  # max / min: every part on the right side of the value, one attains it
                sign = -1 if t.reduce == "max" else 1
                parts = [whole + sign * np.abs(x) for x in noise[1:]] + [whole]
            for member, part in zip(members, parts):
                world[member] = part
    # R and I: every replica holds what the replica of index 0 holds.
    return {rank: world[tuple((a, 0 if a in same else c) for a, c in rank)] for rank in world}


def denote(world: World, spec: TensorType, shape: tuple[int, ...]) -> np.ndarray:
    """The global value per-rank tensors of type ``spec`` denote; asserts R/I are replicated."""
    partial = [(a, t.reduce) for a, t in spec.axes if t.kind is Kind.P]
    same = [a for a, t in spec.axes if t.kind in (Kind.R, Kind.I)]
    for rank, local in world.items():
        for axis in same:
            for member in group(rank, (axis,)):
                np.testing.assert_allclose(world[member], local, err_msg=f"not replicated on {axis}")
    # Resolve the pending reductions one axis at a time, on the ranks of index 0.
    resolved = dict(world)
    for axis, reduce in partial:
        resolved = {r: _REDUCE[reduce]([resolved[m] for m in group(r, (axis,))]) for r in resolved}
    value = np.zeros(shape)
    for rank, local in resolved.items():
        if any(dict(rank)[a] for a, _ in partial) or any(dict(rank)[a] for a in same):
            continue
        index = tuple(slice(None) for _ in shape)
        where = list(index)
        for dim, (block, count) in _block(spec, rank).items():
            size = shape[dim] // count
            where[dim] = slice(block * size, (block + 1) * size)
        value[tuple(where)] = local
    return value


SHAPE = (12, 12, 2)


def check_semantics(src: TensorType, dst: TensorType, steps: Sequence[PlannedStep], seed: int = 0) -> World:
    rng = np.random.default_rng(seed)
    value = rng.standard_normal(SHAPE)
    out = run(distribute(value, src, rng), steps)
    np.testing.assert_allclose(denote(out, dst, SHAPE), value, err_msg=f"{src} -> {dst}: {list(map(str, steps))}")
    return out


# --------------------------------------------------------------------------
# Structure
# --------------------------------------------------------------------------


def check_structure(src: TensorType, dst: TensorType, steps: Sequence[PlannedStep], mesh_order: Sequence[str] | None = None) -> None:
    before = src
    for step in steps:
        assert _local_spec(step.before) == _local_spec(before), (str(step.before), str(before))
        core.transition(step.op, step.src, step.dst, step.label, expert_mode=True)
        if step.src.shard is not None:
            minor = step.before.shard_axes(step.src.shard)[-len(step.axes) :]
            assert step.axes == minor, f"{step} does not take the minor axes {minor} of {step.before}"
        if step.dst.shard is not None:
            assert step.after.shard_axes(step.dst.shard)[-len(step.axes) :] == step.axes
        if mesh_order is not None and len(step.axes) > 1:
            positions = [mesh_order.index(a) for a in step.axes]
            assert positions == sorted(positions), f"{step} breaks mesh order {mesh_order}"
        before = step.after
    assert _local_spec(before) == _local_spec(dst), (str(before), str(dst))


def _local_spec(t: TensorType) -> tuple[object, ...]:
    """A spec up to how single-axis orders are spelled: types and each dim's axes."""
    dims = sorted({x.shard for _, x in t.axes if x.shard is not None})
    return (tuple((a, x.kind, x.shard, x.reduce) for a, x in t.axes), tuple((d, t.shard_axes(d)) for d in dims))


@pytest.mark.parametrize("mesh_order", [None, MESH_ORDER], ids=["any-order", "mesh-order"])
@pytest.mark.parametrize(("src", "dst"), EXAMPLES, ids=IDS)
def test_examples(src: TensorType, dst: TensorType, mesh_order: tuple[str, ...] | None) -> None:
    naive = planner.naive_plan(src, dst, mesh_order=mesh_order)
    plan = planner.plan(src, dst, sizes=MESH, mesh_order=mesh_order)
    check_structure(src, dst, naive)
    check_structure(src, dst, plan, mesh_order)
    assert all(len(step.axes) == 1 for step in naive)
    assert len(plan) <= len(naive)
    assert planner.collective_count(plan) <= planner.collective_count(naive)
    assert planner.received(plan, MESH) <= planner.received(naive, MESH)
    by_naive = check_semantics(src, dst, naive)
    by_plan = check_semantics(src, dst, plan)
    for rank in by_naive:
        np.testing.assert_allclose(by_plan[rank], by_naive[rank], err_msg=f"rank {rank}")


def test_the_examples_save_collectives() -> None:
    saved = [
        planner.collective_count(planner.naive_plan(s, d)) - planner.collective_count(planner.plan(s, d))
        for s, d in EXAMPLES
    ]
    assert all(x >= 0 for x in saved)
    assert sum(saved) >= 10


def _random_spec(rng: random.Random, axes: Sequence[str]) -> TensorType:
    mapping: dict[str, AxisType] = {}
    by_dim: dict[int, list[str]] = {}
    for axis in axes:
        choice = rng.choice(["R", "I", "P", "Pmax", "S0", "S1", "S0", "S1"])
        if choice.startswith("S"):
            by_dim.setdefault(int(choice[1]), []).append(axis)
        else:
            mapping[axis] = core.parse_axis_type(choice)
    for dim, sharding in by_dim.items():
        rng.shuffle(sharding)
        for order, axis in enumerate(sharding):
            mapping[axis] = core.Shard(dim, order if len(sharding) > 1 else None)
    return TensorType.of(mapping)


def _mixed_partials(spec: TensorType) -> bool:
    reductions = {t.reduce for _, t in spec.axes if t.kind is Kind.P}
    return len(reductions) > 1 and bool(reductions & {"max", "min"})


@pytest.mark.parametrize("seed", range(8))
def test_random_specs(seed: int) -> None:
    """Random pairs of specs over three axes: valid, no worse than naive, the same result."""
    rng = random.Random(seed)
    for _ in range(25):
        src, dst = _random_spec(rng, MESH_ORDER), _random_spec(rng, MESH_ORDER)
        if _mixed_partials(src) or _mixed_partials(dst):
            continue  # its value depends on a resolution order the type does not fix
        naive = planner.naive_plan(src, dst)
        plan = planner.plan(src, dst, sizes=MESH)
        check_structure(src, dst, naive)
        check_structure(src, dst, plan)
        assert len(plan) <= len(naive) and planner.collective_count(plan) <= planner.collective_count(naive)
        by_naive, by_plan = check_semantics(src, dst, naive, seed), check_semantics(src, dst, plan, seed)
        for rank in by_naive:
            np.testing.assert_allclose(by_plan[rank], by_naive[rank], err_msg=f"{src} -> {dst} rank {rank}")


# --------------------------------------------------------------------------
# What the plans are
# --------------------------------------------------------------------------


def plan_text(src: str, dst: str, **kwargs: object) -> list[str]:
    return [str(step) for step in planner.plan(tt(src), tt(dst), **kwargs)]  # type: ignore[arg-type]


def naive_text(src: str, dst: str) -> list[str]:
    return [str(step) for step in planner.naive_plan(tt(src), tt(dst))]


def test_flattening_same_kind_steps() -> None:
    assert plan_text("P@dp, P@tp", "R@dp, R@tp") == ["all_reduce((dp, tp), src=P, dst=R)"]
    assert plan_text("S(0)@(dp,tp)", "R@dp, R@tp") == ["all_gather((dp, tp), src=S(0), dst=R)"]
    assert plan_text("P@dp, P@tp", "S(0)@(dp,tp)") == ["reduce_scatter((dp, tp), src=P, dst=S(0))"]
    assert plan_text("P@dp, P@tp", "S(0)@(tp,dp)") == ["reduce_scatter((tp, dp), src=P, dst=S(0))"]
    assert plan_text("S(0)@(dp,tp)", "S(1)@(dp,tp)") == ["all_to_all((dp, tp), src=S(0), dst=S(1))"]
    assert plan_text("R@dp, R@tp", "S(-1)@(tp,dp)") == ["convert((tp, dp), src=R, dst=S(-1))"]
    assert plan_text("P@dp, P@cp, P@tp", "I@dp, I@cp, I@tp", mesh_order=MESH_ORDER) == [
        "all_reduce((dp, cp, tp), src=P, dst=I)"
    ]


def test_the_naive_route_is_one_axis_at_a_time() -> None:
    assert naive_text("P@dp, P@tp", "R@dp, R@tp") == [
        "all_reduce(dp, src=P, dst=R)",
        "all_reduce(tp, src=P, dst=R)",
    ]
    # Minor axis first: tp, then dp.
    assert naive_text("S(0)@(dp,tp)", "R@dp, R@tp") == [
        "all_gather(tp, src=S(0), dst=R)",
        "all_gather(dp, src=S(0), dst=R)",
    ]


def test_only_the_minor_axis_leaves_a_dim() -> None:
    """Reordering the axes of one dim takes both off it and puts them back (docs/spec.md#global-spmd)."""
    assert naive_text("S(0)@(dp,tp)", "S(0)@(tp,dp)") == [
        "all_gather(tp, src=S(0), dst=R)",
        "all_gather(dp, src=S(0), dst=R)",
        "convert(tp, src=R, dst=S(0))",
        "convert(dp, src=R, dst=S(0))",
    ]
    assert plan_text("S(0)@(dp,tp)", "S(0)@(tp,dp)") == [
        "all_gather((dp, tp), src=S(0), dst=R)",
        "convert((tp, dp), src=R, dst=S(0))",
    ]
    # Moving the major axis elsewhere: the minor one steps aside first.
    assert naive_text("S(0)@(dp,tp)", "S(1)@dp, S(0)@tp") == [
        "all_gather(tp, src=S(0), dst=R)",
        "all_to_all(dp, src=S(0), dst=S(1))",
        "convert(tp, src=R, dst=S(0))",
    ]
    assert plan_text("S(0)@(dp,tp)", "S(1)@dp, S(0)@tp") == [
        "all_to_all((dp, tp), src=S(0), dst=S(1))",
        "all_to_all(tp, src=S(1), dst=S(0))",
    ]
    # The minor axis alone moves directly.
    assert plan_text("S(0)@(dp,tp)", "S(0)@dp, S(1)@tp") == ["all_to_all(tp, src=S(0), dst=S(1))"]


def test_gathering_a_major_axis_would_be_wrong() -> None:
    """The simulation can tell: gathering dp of S(0)@(dp,tp) interleaves the rows."""
    src = tt("S(0)@(dp,tp)")
    wrong = PlannedStep("all_gather", ("dp",), core.Shard(0), core.Replicate, src, tt("R@dp, S(0)@tp"))
    rest = planner.plan(tt("R@dp, S(0)@tp"), tt("R@dp, R@tp"))
    with pytest.raises(AssertionError):
        check_semantics(src, tt("R@dp, R@tp"), [wrong, *rest])


def test_mesh_order_keeps_flattened_groups_in_mesh_order() -> None:
    assert plan_text("P@dp, P@tp", "S(0)@(tp,dp)", mesh_order=("dp", "tp")) == [
        "reduce_scatter(tp, src=P, dst=S(0))",
        "reduce_scatter(dp, src=P, dst=S(0))",
    ]
    assert plan_text("S(0)@(dp,tp)", "S(0)@(tp,dp)", mesh_order=("dp", "tp")) == [
        "all_gather((dp, tp), src=S(0), dst=R)",
        "convert(tp, src=R, dst=S(0))",
        "convert(dp, src=R, dst=S(0))",
    ]


def test_the_cost_model_prefers_less_traffic() -> None:
    # Shard before reducing: the all_reduce then moves half as much.
    assert plan_text("P@dp, R@tp", "R@dp, S(1)@tp") == [
        "convert(tp, src=R, dst=S(1))",
        "all_reduce(dp, src=P, dst=R)",
    ]
    # all_to_all over gather-then-shard.
    assert plan_text("S(0)@tp", "S(1)@tp") == ["all_to_all(tp, src=S(0), dst=S(1))"]
    assert planner.received(planner.plan(tt("S(0)@tp"), tt("S(1)@tp")), {"tp": 4}) == pytest.approx(3 / 16)


def test_axis_sizes_change_the_cost_not_the_result() -> None:
    for src, dst in EXAMPLES:
        small, big = planner.plan(src, dst), planner.plan(src, dst, sizes={"dp": 8, "cp": 4, "tp": 16})
        check_structure(src, dst, big)
        assert planner.collective_count(big) <= planner.collective_count(planner.naive_plan(src, dst))
        assert len(small) <= len(planner.naive_plan(src, dst))


def test_nothing_to_do() -> None:
    assert planner.plan(tt("S(0)@(dp,tp), R@cp"), tt("S(0)@(dp,tp), R@cp")) == []
    assert planner.naive_plan(tt("P@tp"), tt("P@tp")) == []
    # With the tensor's rank known, S(-1) and S(1) of a 2-d tensor are one dim.
    assert planner.plan(tt("S(-1)@tp"), tt("S(1)@tp"), ndim=2) == []
    assert plan_text("S(-1)@tp", "S(1)@tp") == ["all_to_all(tp, src=S(-1), dst=S(1))"]


def test_planned_steps_print_as_calls() -> None:
    gather, convert = planner.plan(tt("S(0)@(dp,tp)"), tt("S(0)@(tp,dp)"))
    assert gather.call() == "all_gather(x, (dp, tp), src=S(0), dst=R)"
    assert gather.collective and not convert.collective
    assert str(gather.before) == "S(0)@(dp,tp)" and str(gather.after) == "R@dp, R@tp"
    (pad,) = planner.plan(tt("S(0)@tp"), tt("P@tp"))
    assert pad.call() == "convert(x, tp, src=S(0), dst=P, expert_mode=True)"


def test_plans_are_cached_and_copied() -> None:
    first = planner.plan(tt("P@dp, P@tp"), tt("R@dp, R@tp"))
    first.clear()
    assert len(planner.plan(tt("P@dp, P@tp"), tt("R@dp, R@tp"))) == 1


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


def _error(fn: Callable[[], object]) -> SpmdTypeError:
    with pytest.raises(SpmdTypeError) as info:
        fn()
    assert info.value.code is Code.COLLECTIVE
    # A malformed spec says what to write; every other planner error asks what the user means.
    assert ("Fix:" if info.value.malformed else "Fix (needs your choice):") in str(info.value)
    return info.value


def test_a_varying_axis_without_a_shard_dim_has_no_layout() -> None:
    error = _error(lambda: planner.plan(tt("V@ep, S(0)@tp"), tt("V@ep, R@tp")))
    assert error.axis == "ep" and "S(dim)@ep" in str(error) and "leave ep out" in str(error)


def test_an_axis_on_one_side_only() -> None:
    error = _error(lambda: planner.plan(tt("S(0)@tp, P@dp"), tt("R@tp")))
    assert error.axis == "dp" and "src names axis dp (P@dp)" in str(error)
    error = _error(lambda: planner.naive_plan(tt("R@tp"), tt("R@tp, S(0)@dp")))
    assert error.axis == "dp" and "dst names axis dp" in str(error)


def test_several_axes_on_a_dim_need_an_order() -> None:
    unordered = TensorType.of({"dp": core.Shard(0), "tp": core.Shard(0)})
    error = _error(lambda: planner.plan(unordered, tt("R@dp, R@tp")))
    assert "S(0)@(dp, tp)" in str(error) and "major" in str(error)
    clash = TensorType.of({"dp": core.Shard(0, 0), "tp": core.Shard(0, 0)})
    _error(lambda: planner.validate(tt("R@dp, R@tp"), clash))


def test_pending_reductions_that_do_not_commute() -> None:
    error = _error(lambda: planner.plan(tt("Pmax@dp, P@tp"), tt("R@dp, R@tp")))
    assert error.axis == "dp" and "all_reduce(x, dp, src=Pmax, dst=R)" in str(error)
    # A sum and an average commute; so do a max and data movement; untouched ones are no question.
    planner.plan(tt("Pavg@dp, P@tp"), tt("R@dp, R@tp"))
    planner.plan(tt("Pmax@dp, S(0)@tp"), tt("R@dp, R@tp"))
    planner.plan(tt("Pmax@dp, P@tp, S(0)@cp"), tt("Pmax@dp, P@tp, R@cp"))


def test_an_axis_given_twice() -> None:
    entries = [("tp", core.Shard(0)), ("tp", core.Replicate)]
    error = _error(lambda: planner.spec_of_entries(entries, "dst"))
    assert "redistribute's dst: axis tp is given twice (S(0)@tp and R@tp)" in str(error)
    twice = TensorType((("tp", core.Partial), ("tp", core.Replicate)))
    _error(lambda: planner.validate(twice, tt("R@tp")))


def test_a_shard_dim_out_of_range() -> None:
    error = _error(lambda: planner.plan(tt("S(2)@tp"), tt("R@tp"), ndim=2))
    assert "[-2, 1]" in str(error)


def test_spec_of_entries_keeps_orders() -> None:
    entries = [("dp", core.Shard(0, 0)), ("tp", core.Shard(0, 1)), ("cp", core.Partial)]
    assert planner.spec_of_entries(entries, "src") == tt("S(0)@(dp,tp), P@cp")


def test_the_savings_table_in_the_docs_is_current() -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    script = subprocess.run(
        [sys.executable, str(root / "scripts" / "redistribute_savings.py")], capture_output=True, text=True, check=True
    )
    doc = (root / "docs" / "redistribute.md").read_text()
    table = doc.split("<!-- savings:begin -->\n", 1)[1].split("<!-- savings:end -->", 1)[0]
    assert table == script.stdout, "run python scripts/redistribute_savings.py and paste its output into docs/redistribute.md"

