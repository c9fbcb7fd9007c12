"""Flags per instance through ``spmd-check``: picotron's LM head (``gather_output=True`` on one layer only)
is clean in both configurations, and a literal no configuration gives fails the check, naming the
construction, the flag, the literal and the configuration to add (docs/spec.md#flags-per-instance)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

MODEL = """\
import torch.nn.functional as F
from torch import nn
import spmd_stubs as spmd
from spmd_stubs import I, R, S, Tensor
from spmd_stubs.axes import tp

ColumnOutput = Tensor[I[tp]] if spmd.flags.gather_output else Tensor[S[-1, tp]]


class Column(nn.Module):
    weight: Tensor[S(0)@tp]

    def __init__(self, gather_output: bool) -> None:
        super().__init__()
        self.gather_output = gather_output

    def forward(self, x: Tensor[I@tp]) -> ColumnOutput:
        out = F.linear(spmd.convert(x, tp, src=I, dst=R), self.weight)
        if self.gather_output:
            out = spmd.all_gather(out, tp, src=S(-1), dst=I)
        return out


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = Column(gather_output=False)
        self.head = Column(gather_output=True)

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        h = self.hidden(x)
        return self.head(x)
"""

CONFIG = """\
[mypy]
plugins = spmd_mypy

[mypy-torch._inductor.*,torch._dynamo.*,torch.fx.*,torch.onnx.*,torch.export.*]
follow_imports = skip

[spmd_mypy]
configurations =
{configurations}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("instances")
    (root / "model.py").write_text(MODEL)
    return root


def spmd_check(project: Path, *configurations: str) -> subprocess.CompletedProcess[str]:
    (project / "mypy.ini").write_text(CONFIG.format(configurations="\n".join(f"    {c}" for c in configurations)))
    return subprocess.run([sys.executable, "-m", "spmd_mypy.configurations.cli", "--config-file", "mypy.ini",
                           "model.py"], cwd=project, capture_output=True, text=True, timeout=600)


def test_each_instance_is_checked_in_the_configuration_of_its_literal(project: Path) -> None:
    run = spmd_check(project, "g: gather_output = true", "ng: gather_output = false")
    assert run.stdout.splitlines() == ["Success: no issues found in 2 configurations (g, ng)"], run.stdout + run.stderr
    assert run.returncode == 0


def test_a_literal_no_configuration_gives_fails_the_check(project: Path) -> None:
    run = spmd_check(project, "g: gather_output = true")
    errors = [line for line in run.stdout.splitlines() if ": error:" in line]
    assert errors == ["model.py:27: error: gather_output=False is given by no configuration (g: gather_output = "
                      "true), so the calls it decides are checked in none  [spmd-configuration]"], run.stdout
    assert "Fix (needs your choice): add a configuration with gather_output = false" in run.stdout
    assert run.returncode == 1
