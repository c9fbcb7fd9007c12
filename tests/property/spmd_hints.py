"""The hint harness on generated programs: rejected programs, their hints applied, judged by the reference.

The checker's verdict on a batch of generated programs
(:mod:`spmd_soundness`) leaves the rejected ones; each is fixed as a whole
by :func:`tests.hints.harness.fix_whole` (every ``Fix as an edit`` note of
a round applied to the source, round after round).  A program that ends
clean is read back from its source (:func:`read_back`: every ``spmd.*``
call becomes a statement of its own, so the reference can run it), checked
once more in that form with its loss revealed, run through the runtime in
the simulated world and judged against the reference gradients.  A hint
whose program checks clean but computes other gradients is a bug.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from spmd_programs import AXES, Comm, Local, Program, Statement, Types, Value, to_source
from spmd_reference import random_inputs
from spmd_soundness import judge, run_program, write_batch

from spmd_stubs.core import TensorType, parse_axis_type
from tests.hints.harness import Hinted, Status, Tally, fix_whole, parse
from tests.plugin.harness import config_text, run_mypy

_REVEALED = re.compile(r'Revealed type is "[\w.]*Tensor\[(?P<types>[^\]]*)\]"')


@dataclass
class Judged:
    """The hints of a batch of rejected programs, per error code, and the programs they got wrong."""

    tally: Tally = field(default_factory=Tally)
    status: dict[Status, int] = field(default_factory=dict)
    unrunnable: int = 0
    """Programs that end clean but cannot run, as their original could not: the local types do not
    track shapes, so a wild program may combine tensors of different local shapes."""
    crashes: list[str] = field(default_factory=list)
    """Programs that end clean and raise where their original ran: a hint that gathers a value the
    program then combines at its old local shape.  Loud, unlike a wrong gradient, but not right."""


def judge_hints(programs: list[Program], workdir: Path, mesh: object, seed: int, judged: Judged) -> None:
    """Fix every program of ``programs`` that the checker rejects, run the fixed ones, tally the hints."""
    import torch

    originals = write_batch(programs, workdir / "original")
    paths = write_batch(programs, workdir / "hinted")
    outcomes = fix_whole(paths, workdir)
    rejected = [(program, path.resolve()) for program, path in zip(programs, paths) if outcomes[path.resolve()].first]
    clean = [(program, path) for program, path in rejected if outcomes[path].status is Status.CLEAN]
    runs = {path.resolve(): original for path, original in zip(paths, originals)}
    right = _run_clean(clean, runs, workdir, mesh, torch.Generator().manual_seed(seed), judged)
    for program, path in rejected:
        whole = outcomes[path]
        judged.status[whole.status] = judged.status.get(whole.status, 0) + 1
        for hinted in whole.first:
            judged.tally.add(hinted, None if whole.status is Status.CHOICE else right.get(path, False))


def _runs(mesh: object, path: Path, program: Program, generator: object) -> bool:
    """Whether the program at ``path`` runs at all."""
    return run_program(mesh, path, program, random_inputs(program, generator)).error is None  # type: ignore[arg-type]


def _run_clean(clean: list[tuple[Program, Path]], originals: dict[Path, Path], workdir: Path, mesh: object,
               generator: object, judged: Judged) -> dict[Path, bool | None]:
    """Read every clean program back, reveal its loss type, run it, judge it: path -> right (None:
    it cannot run, and neither could its original)."""
    read = {path: read_back(path.read_text(), program) for program, path in clean}
    revealed_dir = workdir / "read_back"
    revealed_dir.mkdir(exist_ok=True)
    sources = {path: revealed_dir / path.name for path in read}
    revealing = {path: revealed_dir / f"{path.stem}_revealed.py" for path in read}
    for path, program in read.items():
        sources[path].write_text(to_source(program))
        revealing[path].write_text(_with_revealed_loss(program))
    errors, losses = _check_read_back(list(revealing.values()), workdir)
    right: dict[Path, bool | None] = {}
    for unfixed, original in clean:
        source, revealed = sources[original], revealing[original].resolve()
        if errors.get(revealed) or revealed not in losses:
            judged.tally.wrong.append(f"{original.name}: its read-back form does not check clean\n{source.read_text()}")
            right[original] = False
            continue
        fixed = read[original]
        fixed = replace(fixed, loss=Value(fixed.loss.name, fixed.loss.shape, losses[revealed]))
        inputs = random_inputs(fixed, generator)  # type: ignore[arg-type]
        outcome = run_program(mesh, source, fixed, inputs)
        if outcome.error is not None and not _runs(mesh, originals[original], unfixed, generator):
            judged.unrunnable += 1
            right[original] = None
            continue
        problems = [outcome.error] if outcome.error is not None else judge(fixed, outcome, inputs)
        right[original] = not problems
        if problems:
            found = (f"{original.name}, as written:\n{originals[original].read_text()}\nwith its hints applied:\n"
                     f"{original.read_text()}\n" + "\n".join(problems))
            (judged.crashes if outcome.error is not None else judged.tally.wrong).append(found)
    return right


def read_back(source: str, original: Program) -> Program:
    """The program a (fixed) generated source computes, one ``spmd.*`` call per statement.

    The inputs are the original's; a statement's operands that are ``spmd.*``
    calls (or an expression a call takes) get fresh names of their own,
    evaluated first, in order.
    """
    function = next(node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef))
    values = {v.name: v for v in original.inputs}
    values.update({s.target.name: s.target for s in original.body})
    # An untyped selector is an operand name only (it is never an spmd.* call's argument).
    values.update({s.name: Value(s.name, s.shape, ()) for s in original.selectors})
    body: list[Statement] = []
    fresh = iter(f"h{n}" for n in range(10_000))
    loss = original.loss
    for statement in function.body:
        if isinstance(statement, ast.Assign):
            [target] = statement.targets
            assert isinstance(target, ast.Name)
            body.append(_statement(statement.value, _value(values, target.id), body, values, fresh))
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            receiver = statement.value.func
            assert isinstance(receiver, ast.Attribute) and receiver.attr == "backward"
            loss = _operand(receiver.value, body, values, fresh)
    return Program(original.inputs, tuple(body), loss, frozenset(), original.selectors)


def _value(values: dict[str, Value], name: str, like: Value | None = None) -> Value:
    """The value named ``name`` (a fresh one shaped like ``like``: shapes matter only for inputs)."""
    if name not in values:
        assert like is not None
        values[name] = Value(name, like.shape, like.types)
    return values[name]


def _operand(node: ast.expr, body: list[Statement], values: dict[str, Value], fresh: object) -> Value:
    """The value ``node`` computes, as a name: a fresh statement unless it already is one."""
    if isinstance(node, ast.Name):
        return values[node.id]
    like = next(iter(values.values()))
    target = _value(values, next(fresh), like)  # type: ignore[call-overload]
    body.append(_statement(node, target, body, values, fresh))
    return target


def _statement(node: ast.expr, target: Value, body: list[Statement], values: dict[str, Value],
               fresh: object) -> Statement:
    """``target = node``, its ``spmd.*`` operands made statements first."""
    if _is_typed_call(node):
        assert isinstance(node, ast.Call)
        arg = _operand(node.args[0], body, values, fresh)
        axis = node.args[1]
        assert isinstance(axis, ast.Name) and axis.id in AXES
        keywords = {k.arg: k.value for k in node.keywords}
        expert = isinstance(keywords.get("expert_mode"), ast.Constant) and keywords["expert_mode"].value is True
        src, dst = (parse_axis_type(ast.unparse(keywords[k])) for k in ("src", "dst"))
        assert isinstance(node.func, ast.Attribute)
        return Comm(target, node.func.attr, arg.name, axis.id, src, dst, expert)
    rewritten = _HoistCalls(body, values, fresh).visit(node)
    expression = ast.unparse(rewritten)
    names = tuple(dict.fromkeys(n.id for n in ast.walk(rewritten) if isinstance(n, ast.Name) and n.id in values))
    return Local(target, expression, names)


def _is_typed_call(node: ast.expr) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "spmd")


class _HoistCalls(ast.NodeTransformer):
    """Every ``spmd.*`` call inside an expression becomes a statement; the expression reads its name."""

    def __init__(self, body: list[Statement], values: dict[str, Value], fresh: object) -> None:
        self.body, self.values, self.fresh = body, values, fresh

    def visit_Call(self, node: ast.Call) -> ast.expr:
        if _is_typed_call(node):
            return ast.Name(_operand(node, self.body, self.values, self.fresh).name, ast.Load())
        return self.generic_visit(node)  # type: ignore[return-value]


def _with_revealed_loss(program: Program) -> str:
    """The program's source, revealing the loss's type to mypy."""
    return "from typing import reveal_type\n" + to_source(program) + f"    reveal_type({program.loss.name})\n"


def _check_read_back(paths: list[Path], workdir: Path) -> tuple[dict[Path, list[Hinted]], dict[Path, Types]]:
    """One mypy run over the read-back forms: each file's errors, and its loss type as revealed."""
    if not paths:
        return {}, {}
    config = workdir / "read_back.ini"
    config.write_text(config_text())
    output = run_mypy(paths, config, workdir / "mypy_cache", workdir)
    losses: dict[Path, Types] = {}
    for line in output.splitlines():
        match = _REVEALED.search(line)
        if match is not None:
            types = TensorType.parse(match["types"])
            losses[(workdir / line.partition(":")[0]).resolve()] = tuple(types.get(axis) for axis in AXES)
    return parse(output, workdir), losses
