"""Soundness: every program the checker accepts computes the right gradients.

Random typed programs (``spmd_programs``) are checked by ONE mypy run per
batch; each accepted one is run through the runtime shim in the simulated
4-rank world and its per-rank input gradients are compared with plain
autograd over the program's global meaning (``spmd_reference``). A failing
batch shrinks to a minimal program. The programs include index ops with typed
and computed indices, the uneven ``all_to_all`` and moves to the flattened axis
``ep`` by ``reinterpret_mesh`` (``extended``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from spmd_meshes import MESH_TRANSITION, WRONG_ORDER
from spmd_programs import AXES, EP, Comm, Index, Local, Move, Program, RowCounts, Selector, Value, draw, programs
from spmd_reference import groups, list_spec, random_inputs
from spmd_soundness import (
    REFUSED_REGROUPING,
    Report,
    check_batch,
    judge,
    process_batch,
    run_program,
    simulated_world,
    write_batch,
)

from spmd_stubs import core
from spmd_stubs.core import AxisType

BATCH = 40


@pytest.fixture(scope="module")
def mesh() -> Iterator[object]:
    with simulated_world() as m:
        yield m


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("soundness")


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch=st.lists(programs(helpers=True, extended=True), min_size=BATCH, max_size=BATCH))
def test_accepted_programs_compute_correct_gradients(batch: list[Program], mesh: object, workdir: Path) -> None:
    report = Report()
    process_batch(batch, workdir / "batch", workdir / "cache", mesh, seed=0, report=report)
    event("accepted programs with a mesh transition", report.accepted_calls[MESH_TRANSITION])
    assert not report.mypy_crashes, report.mypy_crashes[0]
    assert not report.accepted_runtime_errors, report.accepted_runtime_errors[0]
    assert not report.mismatches, report.mismatches[0]


# --------------------------------------------------------------------------
# The oracle has teeth: fixed programs, run without the checker
# --------------------------------------------------------------------------

R, I, P, V = core.Replicate, core.Invariant, core.Partial, core.Varying  # noqa: E741 -- the spec's names


def _judge_unchecked(program: Program, mesh: object, tmp_path: Path, seed: int = 1) -> list[str]:
    """Run ``program`` through the shim (no checker) on the inputs of ``seed`` and judge its gradients."""
    [path] = write_batch([program], tmp_path)
    inputs = random_inputs(program, torch.Generator().manual_seed(seed))
    outcome = run_program(mesh, path, program, inputs)
    assert outcome.error is None, outcome.error
    return judge(program, outcome, inputs)


def _product(second: AxisType, dst: AxisType) -> Program:
    """x0 (P@tp) * x1 (``second``@tp), summed, then all_reduce(P, dst) on tp; I on dp."""
    x, y = Value("x0", (2, 2), (I, P)), Value("x1", (2, 2), (I, second))
    prod, total, loss = Value("t0", (2, 2), (I, P)), Value("t1", (), (I, P)), Value("t2", (), (I, dst))
    body = (
        Local(prod, "x0 * x1", ("x0", "x1")),
        Local(total, "t0.sum()", ("t0",)),
        Comm(loss, "all_reduce", "t1", AXES[1], P, dst, expert=False),
    )
    return Program((x, y), body, loss, frozenset())


def test_partial_times_replicate_is_right(mesh: object, tmp_path: Path) -> None:
    """Well typed (one P factor, an I loss): no mismatch."""
    assert _judge_unchecked(_product(R, I), mesh, tmp_path) == []


def test_partial_times_partial_is_caught_by_the_reference(mesh: object, tmp_path: Path) -> None:
    """P * P: the local products sum to a1 b1 + a2 b2, not (a1 + a2)(b1 + b2)."""
    assert _judge_unchecked(_product(P, I), mesh, tmp_path)


def test_a_replicate_loss_is_caught_by_the_reference(mesh: object, tmp_path: Path) -> None:
    """An R loss: backward seeds 1.0 on both tp ranks, so the gradients are doubled."""
    assert _judge_unchecked(_product(R, R), mesh, tmp_path)


# --------------------------------------------------------------------------
# SELECT with an untyped selector: the data decides (docs/spec.md#select)
# --------------------------------------------------------------------------


def _select_loss(logits: AxisType) -> Program:
    """``F.cross_entropy(x0, s0)``: logits ``logits``@tp (I on dp), labels a plain torch.Tensor, the same on
    every rank; the loss is backpropagated as it is."""
    x, labels = Value("x0", (2, 4), (I, logits)), Selector("s0", (2,), 4, (False, False))
    loss = Value("t0", (), (I, logits))
    return Program((x,), (Local(loss, "F.cross_entropy(x0, s0)", ("x0", "s0")),), loss, frozenset(), (labels,))


def test_a_select_with_an_untyped_selector_is_judged_by_its_data(mesh: object, workdir: Path, tmp_path: Path) -> None:
    """Logits R on tp give an R loss, its gradient counted tp times: the checker reports it (it once let
    the unknown labels make the loss unknown), the reference sees it; with I logits both accept."""
    wrong, right = _select_loss(R), _select_loss(I)
    run = check_batch([wrong, right], workdir / "select", workdir / "cache")
    assert not run.crashed, run.output
    [wrong_verdict, right_verdict] = run.files.values()
    assert wrong_verdict.codes == {core.Code.BACKWARD.value}, wrong_verdict.errors
    assert right_verdict.accepted, right_verdict.errors
    assert _judge_unchecked(wrong, mesh, tmp_path / "wrong")
    assert _judge_unchecked(right, mesh, tmp_path / "right") == []


# --------------------------------------------------------------------------
# Typed indices and the uneven all_to_all
# --------------------------------------------------------------------------


def test_the_reference_exchanges_rows_as_documented() -> None:
    """The all_to_all docstring's example: rank 0 sends 1 then 2 rows, rank 1 sends 2 then 1."""
    a, b, c, d, e, f = (torch.tensor([float(k)]) for k in range(6))
    ys = list_spec("all_to_all", V, V, [torch.stack([a, b, c]), torch.stack([d, e, f])], sent=[[1, 2], [2, 1]])
    assert [y.tolist() for y in ys] == [[a.tolist(), d.tolist(), e.tolist()], [b.tolist(), c.tolist(), f.tolist()]]


def test_row_counts_agree_between_ranks() -> None:
    """In every group each member sends its rows in all and receives as many (the local shape stays)."""
    counts = RowCounts("n0", "tp", 3, (V, V))
    x = Value("x0", (3,), (V, V))
    program = Program((x,), (), x, frozenset(), counts=(counts,))
    grid = random_inputs(program, torch.Generator().manual_seed(0)).integers["n0"]
    for members in groups("tp"):
        matrix = torch.stack([grid[c] for c in members])
        assert matrix.sum(1).tolist() == [3, 3] and matrix.sum(0).tolist() == [3, 3], matrix


def _exchanged(tokens: AxisType, counts_on_dp: AxisType = R) -> Program:
    """The rows of x0 (I on dp, ``tokens`` on tp) exchanged unevenly on tp by counts ``counts_on_dp`` on dp,
    then each rank's first row summed into an I loss (which rows come first is what the counts decide)."""
    x, routed = Value("x0", (3, 2), (I, tokens)), Value("t0", (3, 2), (I, V))
    total, loss = Value("t1", (), (I, V)), Value("t2", (), (I, I))
    body = (
        Comm(routed, "all_to_all", "x0", "tp", V, V, expert=False, counts="n0"),
        Local(total, "t0[:1].sum()", ("t0",)),
        Comm(loss, "all_gather", "t1", "tp", V, I, expert=False),
    )
    summed = Value("t3", (), (I, I))
    return Program((x,), (*body, Local(summed, "t2.sum()", ("t2",))), summed, frozenset(),
                   counts=(RowCounts("n0", "tp", 3, (counts_on_dp, V)),))


def _gathered(index: AxisType) -> Program:
    """``torch.gather`` from I data (on both axes) with an index ``index`` on tp, summed into the loss (I
    beside an R index, V beside a V one)."""
    result = I if index.kind is core.Kind.R else index
    x, picked, loss = Value("x0", (2, 4), (I, I)), Value("t0", (2, 3), (I, result)), Value("t1", (), (I, result))
    body = (Local(picked, "torch.gather(x0, 1, i0)", ("x0", "i0"), op_constants=True), Local(loss, "t0.sum()", ("t0",)))
    return Program((x,), body, loss, frozenset(), indices=(Index("i0", (2, 3), 4, (I, index)),))


def test_typed_indices_and_uneven_exchanges_are_judged(mesh: object, workdir: Path, tmp_path: Path) -> None:
    """The checker rejects an uneven exchange of R rows and a gather from I data by a V index, and accepts
    their twins (V rows, an R index), whose gradients are right; the V index's gradients, run anyway, are
    wrong (each rank's gradient of the I data counts only its own picks)."""
    programs = [_exchanged(R), _exchanged(core.Shard(0)), _gathered(V), _gathered(R)]
    run = check_batch(programs, workdir / "indices", workdir / "cache")
    assert not run.crashed, run.output
    codes = [verdict.codes for verdict in run.files.values()]
    assert codes[0] == {core.Code.COLLECTIVE.value} and codes[1] == set() == codes[3], run.output
    assert core.Code.INVARIANT_MIX.value in codes[2], run.output
    assert _judge_unchecked(programs[1], mesh, tmp_path / "exchanged") == []
    assert _judge_unchecked(programs[2], mesh, tmp_path / "varying_index")
    assert _judge_unchecked(programs[3], mesh, tmp_path / "replicated_index") == []


def test_counts_that_vary_where_the_rows_do_not_make_wrong_gradients(mesh: object, tmp_path: Path) -> None:
    """Counts V on dp exchange I@dp rows differently on each dp rank: the result varies on dp (on inputs
    whose two dp groups drew different counts)."""
    program = _exchanged(core.Shard(0), counts_on_dp=V)

    def counts_differ_on_dp(seed: int) -> bool:
        counts = random_inputs(program, torch.Generator().manual_seed(seed)).integers["n0"]
        return not torch.equal(counts[(0, 0)], counts[(1, 0)])

    seed = next(s for s in range(100) if counts_differ_on_dp(s))
    assert _judge_unchecked(program, mesh, tmp_path, seed)


def test_counts_that_vary_where_the_rows_do_not_are_rejected(workdir: Path) -> None:
    run = check_batch([_exchanged(core.Shard(0), counts_on_dp=V)], workdir / "counts", workdir / "cache")
    assert not run.crashed, run.output
    [verdict] = run.files.values()
    assert not verdict.accepted


# --------------------------------------------------------------------------
# Moving to the flattened axis ep (docs/spec.md#meshes-over-the-same-ranks)
# --------------------------------------------------------------------------


def _on_ep(x: tuple[AxisType, AxisType], source: tuple[str, ...] = AXES, finish: str = "all_reduce") -> Program:
    """x0 (``x`` on dp, tp) moved to ep by ``{source: ep}``, then ``finish`` there: ``all_reduce`` (P -> I),
    ``all_gather`` (V -> I) or nothing; the sum of the result is the loss, on ep."""
    x0, moved = Value("x0", (2,), x), Value("t0", (2,), (core.AxisType(x[0].kind),), (EP,))
    body: list[Move | Comm | Local] = [Move(moved, "x0", source, (EP,))]
    last = moved
    if finish == "all_reduce":
        last = Value("t1", (2,), (I,), (EP,))
        body.append(Comm(last, "all_reduce", "t0", EP, P, I, expert=False))
    elif finish == "all_gather":
        last = Value("t1", (4, 2), (I,), (EP,))
        body.append(Comm(last, "all_gather", "t0", EP, V, I, expert=False))
    loss = Value(f"t{len(body)}", (), last.types, (EP,))
    body.append(Local(loss, f"{last.name}.sum()", (last.name,)))
    return Program((x0,), tuple(body), loss, frozenset())


def test_the_reference_numbers_ep_members_dp_outermost() -> None:
    """ep's one group: the rank at (dp_index, tp_index) is member dp_index * 2 + tp_index."""
    assert groups(EP) == [[(0, 0), (0, 1), (1, 0), (1, 1)]]


def test_moves_to_ep_are_judged(mesh: object, workdir: Path, tmp_path: Path) -> None:
    """P@(dp, tp) all-reduced on ep and V@(dp, tp) gathered there are accepted and right; an R loss on ep
    is rejected (spmd-backward) and, run anyway, its gradient counted on all 4 ranks; a group R@dp, V@tp
    is rejected (spmd-mesh)."""
    programs = [_on_ep((P, P)), _on_ep((V, V), finish="all_gather"), _on_ep((R, R), finish=""),
                _on_ep((R, V), finish="")]
    run = check_batch(programs, workdir / "meshes", workdir / "cache")
    assert not run.crashed, run.output
    codes = [verdict.codes for verdict in run.files.values()]
    assert codes[:3] == [set(), set(), {core.Code.BACKWARD.value}], run.output
    assert core.Code.MESH.value in codes[3], run.output
    assert _judge_unchecked(programs[0], mesh, tmp_path / "partial") == []
    assert _judge_unchecked(programs[1], mesh, tmp_path / "varying") == []
    assert _judge_unchecked(programs[2], mesh, tmp_path / "replicate_loss")


def test_a_move_in_the_wrong_order_is_typed_and_refused_at_run_time(mesh: object, workdir: Path, tmp_path: Path) -> None:
    """``{(tp, dp): ep}`` of V@(dp, tp): the checker types it V@ep (it cannot know ep's ranks); the runtime
    refuses it, ep being (dp, tp)'s ranks in another order."""
    program = _on_ep((V, V), source=WRONG_ORDER, finish="all_gather")
    run = check_batch([program], workdir / "wrong_order", workdir / "cache")
    assert not run.crashed and all(v.accepted for v in run.files.values()), run.output
    [path] = write_batch([program], tmp_path)
    outcome = run_program(mesh, path, program, random_inputs(program, torch.Generator().manual_seed(1)))
    assert outcome.error is not None and outcome.error.startswith(f"ValueError: {REFUSED_REGROUPING}"), outcome.error


def test_the_sample_holds_mesh_transitions() -> None:
    """Programs as many as the sample above move values to ep (one in ten or so)."""
    sample = draw(4 * BATCH, seed_value=0, helpers=True, extended=True)
    assert sum(MESH_TRANSITION in program.features for program in sample) >= 5
