"""Check a batch of generated programs with mypy, run them, compare gradients.

The pipeline of the soundness property (used by ``test_soundness.py`` and
``scripts/soundness.py``):

1. :func:`check_batch` writes every program as a module and runs mypy with
   the ``spmd_mypy`` plugin ONCE over all of them (one shared cache); a
   program is accepted when mypy reports no error in its module.
2. :func:`run_program` imports a program's module and calls it in the
   simulated 4-rank world through the real runtime shim; the function itself
   calls ``loss.backward()``; the per-rank input gradients are read back.
3. :func:`judge` compares them with the reference gradients of the program's
   global meaning (``spmd_reference``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

import torch
import torch.distributed as dist
from mypy_batch import REPO, FileErrors, MypyRun, run_mypy, write_config
from spmd_meshes import WRONG_ORDER
from spmd_programs import Call, Local, Move, Program, to_source
from spmd_reference import Inputs, expected_pairs, random_inputs, rank_parts, reference_gradients, selector_parts

RUNTIME_TESTS = REPO / "tests" / "runtime"
if str(RUNTIME_TESTS) not in sys.path:
    sys.path.insert(0, str(RUNTIME_TESTS))

from spmd_world import MESH_DIMS, MESH_SHAPE, WORLD_SIZE, SimWorld  # noqa: E402

# --------------------------------------------------------------------------
# 1. One mypy run per batch
# --------------------------------------------------------------------------


def module_name(index: int) -> str:
    return f"prog_{index:05d}"


def write_batch(programs: list[Program], directory: Path) -> list[Path]:
    """Every program as a module ``prog_NNNNN.py`` (stale ones removed)."""
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("prog_*.py"):
        stale.unlink()
    paths = []
    for index, program in enumerate(programs):
        path = directory / f"{module_name(index)}.py"
        path.write_text(to_source(program))
        paths.append(path)
    return paths


def check_batch(programs: list[Program], directory: Path, cache_dir: Path) -> MypyRun:
    """mypy (with the plugin) once over every program."""
    paths = write_batch(programs, directory)
    return run_mypy(paths, write_config(directory), cache_dir)


# --------------------------------------------------------------------------
# 2. The simulated world and a program's run in it
# --------------------------------------------------------------------------


REFUSED_REGROUPING = "reinterpret_mesh moves"
"""How the runtime's refusal of a regrouping whose ranks are not the destination's begins."""


@contextlib.contextmanager
def simulated_world() -> Iterator[object]:
    """The runtime tests' world: 4 ranks in one process, a 2 dp x 2 tp mesh bound.

    Initialises the fake process group unless a fixture already did, and
    yields the mesh; :func:`run_program` enters LocalTensorMode per program.

    ``reinterpret_mesh`` reads the flattened ranks of (dp, tp) and (tp, dp) off the mesh's layout
    (every rank's group is all 4 ranks, so every rank's comparison is rank 0's); gathering them from
    groups bound one by one runs on real processes in tests/runtime/test_mesh_transitions_gloo.py.
    """
    from torch.distributed._local_tensor import LocalTensorMode
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers "fake"

    owner = not dist.is_initialized()
    if owner:
        dist.init_process_group("fake", rank=0, world_size=WORLD_SIZE, store=FakeStore())
    try:
        with LocalTensorMode(WORLD_SIZE):
            mesh = init_device_mesh("cpu", MESH_SHAPE, mesh_dim_names=MESH_DIMS)
        yield mesh
    finally:
        if owner:
            dist.destroy_process_group()


def load_program(path: Path) -> object:
    """The ``program`` function of a generated module (imported under a unique name)."""
    name = f"spmd_soundness_{path.parent.name}_{path.stem}_{abs(hash(path.read_text()))}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.program


@dataclass
class Outcome:
    """A program's run: gradients per input and rank, or the error the runtime raised."""

    grads: Optional[dict[str, dict[int, torch.Tensor]]] = None
    error: Optional[str] = None


def run_program(mesh: object, path: Path, program: Program, inputs: Inputs) -> Outcome:
    """Call the generated function on LocalTensors through the runtime shim, ``ep`` bound to the
    flattening of (dp, tp)."""
    from torch.distributed._local_tensor import LocalTensorMode

    import spmd_stubs as spmd
    from spmd_stubs.axes import dp, ep, tp

    function = load_program(path)
    with LocalTensorMode(WORLD_SIZE) as mode:
        spmd.bind_mesh(mesh)  # type: ignore[arg-type]
        try:
            spmd.bind_groups({ep: spmd.group_of((dp, tp))})
            world = SimWorld(mode)
            tensors = [world.make(rank_parts(v, inputs)).requires_grad_() for v in program.inputs]
            untyped = [s.name for s in program.selectors]
            integers = [i.name for i in program.indices] + [c.name for c in program.counts]
            extra = [world.make(selector_parts(name, inputs)) for name in untyped + integers]
            function(*tensors, *extra)  # type: ignore[operator]
        except (ValueError, RuntimeError) as err:
            return Outcome(error=f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=-3)}")
        finally:
            spmd.unbind()
    grads = {}
    for v, x in zip(program.inputs, tensors):
        grad = x.grad
        grads[v.name] = {
            r: (grad._local_tensors[r].detach() if grad is not None else torch.zeros(v.shape, dtype=torch.float64))  # type: ignore[attr-defined]
            for r in range(WORLD_SIZE)
        }
    return Outcome(grads=grads)


# --------------------------------------------------------------------------
# 3. The judgement
# --------------------------------------------------------------------------


def judge(program: Program, outcome: Outcome, inputs: Inputs) -> list[str]:
    """Every gradient comparison that fails (empty: the runtime's gradients are right)."""
    assert outcome.grads is not None
    reference = reference_gradients(program, inputs)
    problems = []
    for v in program.inputs:
        for what, got, want in expected_pairs(v, outcome.grads[v.name], reference[v.name]):
            if got.shape != want.shape or not torch.allclose(got, want, rtol=1e-6, atol=1e-8):
                problems.append(f"{what} ({v.types}): runtime {got.flatten().tolist()} != reference {want.flatten().tolist()}")
    return problems


@dataclass
class Report:
    """The tally of one or more batches."""

    programs: int = 0
    accepted: int = 0
    accepted_without_gradients: int = 0
    """Accepted programs with an operand that carries no gradient (a detached value, a mask)."""
    accepted_with_unknown_selector: int = 0
    """Accepted programs with a SELECT op whose selector is untyped (docs/spec.md#select)."""
    accepted_calls: Counter[str] = field(default_factory=Counter)
    """Accepted programs per kind of helper call they make and per feature they hold (:func:`call_kinds`)."""
    rejected_calls: Counter[str] = field(default_factory=Counter)
    rejected_calls_wrong: Counter[str] = field(default_factory=Counter)
    """Rejected programs per kind of helper call and feature, and those of them that run with wrong gradients."""
    accepted_runtime_errors: list[str] = field(default_factory=list)
    accepted_refused_regroupings: int = 0
    """Accepted programs whose ``reinterpret_mesh`` names ep's ranks in another order, ``{(tp, dp): ep}``:
    the checker does not know which ranks an axis is bound to; the runtime refuses the call (its
    documented check, docs/spec.md#meshes-over-the-same-ranks) before any gradient is computed."""
    mismatches: list[str] = field(default_factory=list)
    rejected: Counter[str] = field(default_factory=Counter)
    rejected_refused: Counter[str] = field(default_factory=Counter)
    rejected_wrong: Counter[str] = field(default_factory=Counter)
    disagreements: list[str] = field(default_factory=list)
    mypy_crashes: list[str] = field(default_factory=list)


def rules_verdicts(programs: list[Program], directory: Path) -> dict[Path, FileErrors]:
    """The algebra's own verdicts (the generator's prediction) instead of mypy's.

    Measures the rules and the runtime without the plugin in between: for
    when the plugin is not at hand, or to tell a plugin bug from a rule bug.
    """
    paths = write_batch(programs, directory)
    return {path: FileErrors(sorted(p.predicted), set(p.predicted)) for path, p in zip(paths, programs)}


def call_kinds(program: Program) -> set[str]:
    """The kinds of helper call a program makes (``Helper.kind``), ``size_one_bypass`` when a helper
    tests an axis's size, and the index ops and uneven exchanges it holds (``Program.features``)."""
    helpers = [s.helper for s in program.body if isinstance(s, Call)]
    return ({h.kind for h in helpers} | ({"size_one_bypass"} if any(h.size_one for h in helpers) else set())
            | program.features)


def process_batch(programs: list[Program], directory: Path, cache_dir: Path, mesh: object, seed: int, report: Report, checker: str = "mypy") -> None:
    """Check the batch (one mypy run, or the rules), run every program, add the results to ``report``."""
    if checker == "mypy":
        run = check_batch(programs, directory, cache_dir)
        if run.crashed:
            report.mypy_crashes.append(run.output[-4000:])
            return
        verdicts = run.files
    else:
        verdicts = rules_verdicts(programs, directory)
    generator = torch.Generator().manual_seed(seed)
    for program, (path, verdict) in zip(programs, verdicts.items()):
        report.programs += 1
        if verdict.accepted != (not program.predicted):
            report.disagreements.append(_describe(program, verdict, "the checker and the rules' prediction disagree"))
        inputs = random_inputs(program, generator)
        outcome = run_program(mesh, path, program, inputs)
        if verdict.accepted:
            report.accepted += 1
            report.accepted_without_gradients += any(
                isinstance(s, Local) and s.op_constants for s in program.body)
            report.accepted_with_unknown_selector += bool(program.selectors)
            report.accepted_calls.update(call_kinds(program))
            if outcome.error is not None and _refused_regrouping(program, outcome.error):
                report.accepted_refused_regroupings += 1
            elif outcome.error is not None:
                report.accepted_runtime_errors.append(_describe(program, verdict, outcome.error))
            else:
                problems = judge(program, outcome, inputs)
                if problems:
                    report.mismatches.append(_describe(program, verdict, "\n".join(problems)))
            continue
        wrong = outcome.error is None and bool(judge(program, outcome, inputs))
        report.rejected_calls.update(call_kinds(program))
        if wrong:
            report.rejected_calls_wrong.update(call_kinds(program))
        for code in verdict.codes:
            report.rejected[code] += 1
            if outcome.error is not None:
                report.rejected_refused[code] += 1
            elif wrong:
                report.rejected_wrong[code] += 1


def _refused_regrouping(program: Program, error: str) -> bool:
    """The runtime's refusal of a move whose source group names ep's ranks in another order."""
    return (error.startswith(f"ValueError: {REFUSED_REGROUPING}")
            and any(isinstance(s, Move) and s.source == WRONG_ORDER for s in program.body))


def _describe(program: Program, verdict: FileErrors, why: str) -> str:
    errors = "\n".join(verdict.errors) or "(accepted)"
    return f"{to_source(program)}# predicted: {sorted(program.predicted)}\n# mypy: {errors}\n# {why}\n"
