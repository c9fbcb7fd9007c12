"""``spmd-migrate --infer`` from the command line on small projects: mypy's warm cache, diffs, copies, TODO lines.

Each test writes its files under ``tmp_path`` and checks them with the
recommended config; the mypy cache is the one ``test_infer.py`` keeps (torch
analysed once).
"""

from __future__ import annotations

import fcntl
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

import pytest

from spmd_mypy.migrate.cli import main
from tests.plugin.harness import run_mypy

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "spmd_mypy" / "recommended.ini"

NORM = textwrap.dedent("""\
    from torch import nn
    from spmd_stubs import I, Tensor
    from spmd_stubs.axes import tp


    class Norm(nn.Module):
        def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
            return x * 2
    """)

BLOCK = textwrap.dedent("""\
    from torch import nn
    from layers import Norm
    from spmd_stubs import I, Tensor
    from spmd_stubs.axes import tp


    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = Norm()

        def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
            return _doubled(self.norm(x))


    def _doubled(y):
        return y * 2""")
"""The module checked: it calls a layer of a module outside the paths given, and ends without a newline."""


@pytest.fixture
def cache(kept_dir: Callable[[str], Path]) -> Iterator[Path]:
    kept = kept_dir("spmd_infer")
    with open(kept / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield kept / "mypy"


def _infer(cache: Path, *arguments: str) -> int:
    return main(["--infer", "--config-file", str(CONFIG), "--cache-dir", str(cache), *arguments])


def _git(repo: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *arguments], cwd=repo, capture_output=True, text=True)


def test_a_callee_mypy_loaded_from_its_cache(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """``layers.py`` is checked once (cache warm), then only ``model.py`` is given: ``Norm.forward`` is a
    definition loaded from the cache (no ``arguments``, no body), which reading its call must not need.

    The diff of a file without a final newline is one ``git apply`` takes.
    """
    (tmp_path / "layers.py").write_text(NORM)
    (tmp_path / "model.py").write_text(BLOCK)
    run_mypy([tmp_path / "model.py", tmp_path / "layers.py"], CONFIG, cache, tmp_path)
    monkeypatch.chdir(tmp_path)
    assert _infer(cache, "model.py") == 0
    patch, err = capsys.readouterr()
    assert "+def _doubled(y: Tensor[I@tp]) -> Tensor[I@tp]:\n" in patch, err
    assert patch.endswith("-    return y * 2\n\\ No newline at end of file\n+    return y * 2\n"
                          "\\ No newline at end of file\n") or patch.endswith(
        "     return y * 2\n\\ No newline at end of file\n"), patch
    assert _git(tmp_path, "init", "-q").returncode == 0
    (tmp_path / "fix.patch").write_text(patch)
    applied = _git(tmp_path, "apply", "fix.patch")
    assert applied.returncode == 0, applied.stderr
    assert _infer(cache, "--check", "--quiet", "model.py") == 0  # what git applied is all there is to write
    assert (tmp_path / "layers.py").read_text() == NORM


def test_output_dir_keeps_the_layout_of_single_files(cache: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Copies go below the directory the files' packages share: ``out/pkg/model.py``, ``out/pkg/sub/head.py``."""
    package = tmp_path / "src" / "pkg"
    (package / "sub").mkdir(parents=True)
    for init in (package / "__init__.py", package / "sub" / "__init__.py"):
        init.write_text("")
    (package / "layers.py").write_text(NORM)
    for copy in (package / "model.py", package / "sub" / "head.py"):
        copy.write_text(BLOCK.replace("from layers import", "from pkg.layers import"))
    monkeypatch.chdir(tmp_path / "src")
    out = tmp_path / "out"
    assert _infer(cache, "--quiet", "--output-dir", str(out), "pkg/model.py", "pkg/sub/head.py") == 0
    copies = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.py"))
    assert copies == ["pkg/model.py", "pkg/sub/head.py"]
    for copy in copies:
        assert "def _doubled(y: Tensor[I@tp]) -> Tensor[I@tp]:" in (out / copy).read_text()
    assert "def _doubled(y):" in (package / "model.py").read_text()


REJECTED = textwrap.dedent('''\
    from torch import nn

    from spmd_stubs import I, R, Tensor
    from spmd_stubs.axes import tp


    class Layer(nn.Module):
        def forward(self, x: Tensor[R@tp]) -> Tensor[R@tp]:
            return x


    class Doubled(Layer):
        def forward(self, x):
            return x * 2


    def _scale(x):
        return x * 2


    def run(layer: Doubled, h: Tensor[I@tp], r: Tensor[R@tp], i: Tensor[I@tp], flag: bool) -> None:
        layer.forward(h)
        _scale(r if flag else i)
        _scale(i)
    ''')


def test_a_todo_names_the_lines_of_the_file_it_is_written_in(cache: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """In the file and in the list on stderr alike: the lines as the file reads once written."""
    source = tmp_path / "rejected.py"
    source.write_text(REJECTED)
    assert _infer(cache, "--in-place", str(source)) == 0
    err = capsys.readouterr().err
    lines = source.read_text().splitlines()
    todos = [line for line in lines if line.startswith("    # TODO(spmd-migrate): ") or line.startswith(
        "# TODO(spmd-migrate): ")]
    assert len(todos) == 2, lines
    override = 1 + lines.index("    def forward(self, x):")
    first_call, second_call = 1 + lines.index("    _scale(r if flag else i)"), 1 + lines.index("    _scale(i)")
    assert any(f"mypy then reported line {override}: " in todo for todo in todos), todos
    assert any(f"(line {first_call} passes R@tp | I@tp, line {second_call} passes I@tp)" in todo
               for todo in todos), todos
    for todo in todos:
        assert todo.strip().removeprefix("# TODO(spmd-migrate): ") in err


def test_a_bad_setting_stops_with_its_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The configurations are read before the first check: a bad one is said as mypy says it, no traceback."""
    config = tmp_path / "mypy.ini"
    config.write_text(CONFIG.read_text() + "\n[spmd_mypy]\nconfigurations =\n    sp: sequence_parallel = maybe?\n")
    (tmp_path / "model.py").write_text(BLOCK)
    assert main(["--infer", "--config-file", str(config), "--cache-dir", str(tmp_path / "cache"),
                 str(tmp_path / "model.py")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"spmd-migrate --infer: mypy stopped:\n{config}: error: [spmd_mypy] "), err
