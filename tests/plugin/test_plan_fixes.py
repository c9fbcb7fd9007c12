"""Every ``spmd-plan`` fix, applied to its case file, gives a plan the checker passes.

With ``show_fixes``, each fix of a plan diagnostic comes as an edit (an
entry's style replaced, or an entry added to the plan's dict display); a key
that names no sub-module gets the key to write.  Each case file of the plans
group gets its fixes written into a copy, and one mypy run checks the copies.
Whether a fixed plan is a correct program in torch's semantics is what the
checker's model of the styles says (tests/test_parallel_styles.py pins that
model to torch's ``style.py``).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from tests.plugin.conftest import MypyRuns
from tests.plugin.harness import CASES, config_text, parse_output, run_mypy

PLANS = CASES / "plans"
_EDIT = re.compile(r"Fix as an edit: (?P<edit>\{.*\})$")
_KEY = re.compile(r'names no sub-module .* Fix \(needs your choice\): "(?P<key>[^"]+)"\.')


def _edited(text: str, edits: list[dict[str, object]]) -> str:
    """``text`` with ``edits`` applied (bottom up, so earlier places stay put) and their imports added."""
    lines = text.splitlines(keepends=True)
    starts = [sum(len(line) for line in lines[:number]) for number in range(len(lines) + 1)]
    unique = {json.dumps(edit, sort_keys=True): edit for edit in edits}.values()
    for edit in sorted(unique, key=lambda e: (e["line"], e["column"]), reverse=True):
        begin = starts[int(str(edit["line"])) - 1] + int(str(edit["column"]))
        end = starts[int(str(edit["end_line"])) - 1] + int(str(edit["end_column"]))
        text = text[:begin] + str(edit["replacement"]) + text[end:]
    imports = dict.fromkeys(str(i) for edit in unique for i in edit["imports"])  # type: ignore[attr-defined]
    first = re.search(r"^(from|import) ", text, re.MULTILINE)
    at = first.start() if first is not None else 0
    return text[:at] + "".join(f"{line}\n" for line in imports) + text[at:]


def test_every_plan_fix_applied_as_its_edit_makes_the_plan_pass(mypy_runs: MypyRuns, tmp_path: Path) -> None:
    """The plans group runs with ``show_fixes`` (its ``_extra.ini``): each diagnostic carries its edit."""
    copies = tmp_path / "plugin" / "cases" / "plans"
    copies.mkdir(parents=True)
    for module in PLANS.glob("_*.py"):
        shutil.copy(module, copies / module.name)
    fixed_files = []
    for case in sorted(PLANS.glob("[!_]*.py")):
        text, edits = case.read_text(), []
        for diagnostic in mypy_runs.diagnostics(case):
            assert diagnostic.code == "spmd-plan", f"{case.name}:{diagnostic.line}: {diagnostic.message}"
            edit, key = _EDIT.search(diagnostic.message), _KEY.search(diagnostic.message)
            if key is not None:  # the key as written replaced by the one the fix names
                line = text.splitlines()[diagnostic.line - 1]
                written = re.search(r'"([^"]+)"', line)
                assert written is not None, line
                text = text.replace(line, line.replace(written.group(), f'"{key["key"]}"', 1), 1)
                continue
            assert edit is not None, f"{case.name}:{diagnostic.line}: no fix as an edit: {diagnostic.message}"
            assert "Fix: " in diagnostic.message, f"{case.name}:{diagnostic.line}: a checked fix labelled a choice"
            edits.append(json.loads(edit["edit"]))
        if text != case.read_text() or edits:
            (copies / case.name).write_text(_edited(text, edits))
            fixed_files.append(copies / case.name)
    assert len(fixed_files) >= 12, fixed_files
    config = tmp_path / "mypy.ini"
    config.write_text(config_text())
    output = run_mypy(fixed_files, config, tmp_path / "cache", tmp_path, flags=["--explicit-package-bases"])
    assert not any(parse_output(output, tmp_path).values()), output


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
