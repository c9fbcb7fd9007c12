"""Every ``spmd-plan`` fix, applied to its case file, gives a plan the checker passes.

The fix names one plan entry and its new style (or, for a key that names no
sub-module, the key to write), or an entry to add (on the plan's first line);
each case file gets its fixes written into a copy, and one mypy run checks
the copies.  Whether a fixed plan is a correct
program in torch's semantics is what the checker's model of the styles says
(tests/test_parallel_styles.py pins that model to torch's ``style.py``).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.plugin.conftest import MypyRuns
from tests.plugin.harness import CASES, config_text, parse_output, run_mypy

PLANS = CASES / "plans"
_FIX = re.compile(r'Fix \(needs your choice\): (?P<add>add )?"(?P<key>[^"]+)"(?:: (?P<style>.+))?\.$')
_ENTRY = re.compile(r'^(?P<indent>\s*)"(?P<key>[^"]+)": (?P<style>.+?),(?P<comment>\s*#.*)?$')


def _fixed(line: str, key: str, style: str | None) -> str:
    """``line``, a one-line plan entry, with the fix applied and its expectation dropped."""
    entry = _ENTRY.match(line)
    assert entry is not None, f"not a one-line plan entry: {line!r}"
    return f'{entry["indent"]}"{key}": {style if style is not None else entry["style"]},'


def test_every_plan_fix_makes_the_plan_pass(mypy_runs: MypyRuns, tmp_path: Path) -> None:
    copies = tmp_path / "plugin" / "cases" / "plans"
    copies.mkdir(parents=True)
    shutil.copy(PLANS / "_llama.py", copies / "_llama.py")
    fixed_files = []
    for case in sorted(PLANS.glob("[!_]*.py")):
        lines = case.read_text().splitlines()
        fixes = [(d.line, _FIX.search(d.message)) for d in mypy_runs.diagnostics(case) if d.code == "spmd-plan"]
        for number, fix in fixes:
            assert fix is not None, f"{case.name}:{number}: no fix that names an entry"
            if not fix["add"]:
                lines[number - 1] = _fixed(lines[number - 1], fix["key"], fix["style"])
        for number, fix in sorted(fixes, key=lambda found: -found[0]):  # bottom up: line numbers stay
            if fix is not None and fix["add"]:
                lines[number - 1] = lines[number - 1].split("  # E:")[0]
                indent = re.match(r"\s*", lines[number])
                assert indent is not None and fix["style"], lines[number]
                lines.insert(number, f'{indent.group()}"{fix["key"]}": {fix["style"]},')
        if fixes:
            (copies / case.name).write_text("\n".join(lines) + "\n")
            fixed_files.append(copies / case.name)
    assert len(fixed_files) >= 8, fixed_files
    config = tmp_path / "mypy.ini"
    config.write_text(config_text())
    output = run_mypy(fixed_files, config, tmp_path / "cache", tmp_path, flags=["--explicit-package-bases"])
    found = parse_output(output, tmp_path)
    assert not any(found.values()), output


_BLOCK = '''\
import torch
import torch.nn.functional as F
from torch import nn


class FeedForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Linear(8, 8, bias=False)
        self.w2 = nn.Linear(8, 8, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)))
'''

_PLAN = '''\
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from block import FeedForward


def shard(ffn: FeedForward, tp_mesh: DeviceMesh) -> None:
    parallelize_module(ffn, tp_mesh, {"w1": ColwiseParallel(), "w2": RowwiseParallel()})
'''


def test_a_plan_is_checked_again_when_only_its_modules_body_changes(tmp_path: Path) -> None:
    """An edit of ``forward``'s body leaves the class's interface, so mypy would keep the plan's module
    fresh in its cache: the plugin never lets it be."""
    (tmp_path / "block.py").write_text(_BLOCK)
    (tmp_path / "plan.py").write_text(_PLAN)
    config = tmp_path / "mypy.ini"
    config.write_text(config_text())

    def check() -> str:
        return run_mypy([tmp_path / "plan.py"], config, tmp_path / "cache", tmp_path)

    assert "spmd-plan" not in check()
    assert "spmd-plan" not in check()  # warm
    # the whole input added to w1's columns: x is I@tp, as w1 takes it
    (tmp_path / "block.py").write_text(_BLOCK.replace("F.silu(self.w1(x))", "F.silu(self.w1(x)) + x"))
    assert 'S(-1)@tp from "w1" and I@tp break a rule: add mixes Invariant with Varying' in check()
