"""On untyped code the plugin changes nothing: mypy's own plugin still runs where ours has a hook.

mypy takes the first plugin hook it finds for a name; the checker's hooks
run after mypy's default plugin's for the same name, so what that plugin
reports (``dataclasses.replace``, ``functools.partial(...)(...)``,
singledispatch, ``ctypes`` arrays) is reported with the checker on too.
And a module call is checked against ``forward`` only where SPMD types are
involved: elsewhere mypy's ``Any`` stands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from tests.plugin.harness import ROOT, run_mypy

PLAIN = """\
import ctypes
import dataclasses
import functools
from functools import singledispatch

import torch


@dataclasses.dataclass
class C:
    x: int


dataclasses.replace(C(1), x="a")


def f(a: int, b: str) -> None: ...


functools.partial(f, 1)(2)


@singledispatch
def g(x: object) -> None: ...


g(1, 2)
(ctypes.c_int * 3)()[0] = "a"
t = torch.Tensor(3)
u: torch.Tensor = torch.Tensor()
pairs = list(zip(*[(torch.ones(1), torch.ones(1))]))
pairs.append(1)


class Net(torch.nn.Module):
    def forward(self, x: int) -> int:
        return x


Net()("module calls are Any to mypy: not checked against an untyped forward")
"""


def _errors(tmp_path: Path, plugins: str, cache: Path) -> list[str]:
    (tmp_path / "plain.py").write_text(PLAIN)
    config = tmp_path / f"{plugins or 'none'}.ini"
    config.write_text(f"[mypy]\nmypy_path = {ROOT}\n{plugins}\n")
    output = run_mypy([Path("plain.py")], config, cache, cwd=tmp_path)
    return [line for line in output.splitlines() if ": error:" in line]


def test_plain_code_gets_mypys_own_errors_with_the_plugin(tmp_path: Path, kept_dir: Callable[[str], Path]) -> None:
    cache = kept_dir("invisible")
    without = _errors(tmp_path, "", cache / "without")
    with_plugin = _errors(tmp_path, "plugins = spmd_mypy", cache / "with")
    assert len(without) == 5, without
    assert with_plugin == without
