"""spmd-migrate's command line: modes, summary, idempotence, never touching what it was not asked to."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spmd_mypy.migrate.cli import main

SOURCE = textwrap.dedent("""\
    import torch.distributed as dist
    from megatron.core.tensor_parallel.mappings import reduce_from_tensor_model_parallel_region

    # A comment that must survive.
    def forward(x):
        y = reduce_from_tensor_model_parallel_region(x)  # reduce
        buf = y * 2
        dist.all_reduce(buf, group=tp_group)
        return buf
    """)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    package = tmp_path / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "layer.py").write_text(SOURCE)
    return tmp_path / "src"


def test_default_prints_a_diff_and_writes_nothing(tree: Path, capsys) -> None:
    assert main([str(tree)]) == 0
    out, err = capsys.readouterr()
    assert "-    y = reduce_from_tensor_model_parallel_region(x)  # reduce\n" in out
    assert "+    y = spmd.all_reduce(x, tp, src=P, dst=I)  # reduce\n" in out
    assert "spmd-migrate: 1 calls rewritten, 1 TODOs" in err
    assert (tree / "pkg" / "layer.py").read_text() == SOURCE


def test_in_place_twice_is_in_place_once(tree: Path, capsys) -> None:
    layer = tree / "pkg" / "layer.py"
    assert main(["--in-place", str(layer)]) == 0
    once = layer.read_text()
    assert "# A comment that must survive.\n" in once
    assert "    # TODO(spmd-migrate): choose the type of the replicated result" in once
    capsys.readouterr()
    assert main(["--in-place", str(layer)]) == 0
    assert layer.read_text() == once
    assert "0 calls rewritten, 1 TODOs, 0 collectives inside autograd Functions left as is, 0 files changed" \
        in capsys.readouterr().err


def test_output_dir_copies_and_leaves_the_original(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["--output-dir", str(out), "--replicated-dst", "R", str(tree / "pkg")]) == 0
    migrated = (out / "pkg" / "layer.py").read_text()
    assert "    buf = spmd.all_reduce(buf, tp, src=P, dst=R, group=tp_group)\n" in migrated
    assert (out / "pkg" / "__init__.py").exists()
    assert (tree / "pkg" / "layer.py").read_text() == SOURCE


def test_missing_path_is_an_error(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path / "nope.py")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_python_dash_m_runs_the_same_command(tree: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "spmd_mypy.migrate", "--quiet", str(tree)],
                          capture_output=True, text=True)
    assert done.returncode == 0
    assert "+    y = spmd.all_reduce(x, tp, src=P, dst=I)  # reduce" in done.stdout
    assert "1 calls rewritten" in done.stderr


@pytest.mark.parametrize(("name", "text"), [
    ("mypy.ini", "[mypy]\n[spmd_mypy]\ngroups = *.tp_group: shard\n"),
    ("pyproject.toml", '[tool.mypy]\n[tool.spmd_mypy.groups]\n"*.tp_group" = "shard"\n'),
])
def test_the_checkers_group_declaration_names_the_axis(tree: Path, tmp_path: Path, name: str, text: str,
                                                      monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """From --config-file, or from the config file mypy would find in the current directory."""
    layer = tree / "pkg" / "layer.py"
    layer.write_text(SOURCE.replace("group=tp_group", "group=self.tp_group"))
    config = tmp_path / name
    config.write_text(text)
    assert main(["--replicated-dst", "R", "--config-file", str(config), str(layer)]) == 0
    assert "+    buf = spmd.all_reduce(buf, shard, src=P, dst=R, group=self.tp_group)\n" in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)
    assert main(["--replicated-dst", "R", str(layer)]) == 0
    assert "+    buf = spmd.all_reduce(buf, shard, src=P, dst=R, group=self.tp_group)\n" in capsys.readouterr().out


def test_a_bad_group_declaration_is_an_error(tree: Path, tmp_path: Path, capsys) -> None:
    config = tmp_path / "mypy.ini"
    config.write_text("[spmd_mypy]\ngroups = *.tp_group\n")
    assert main(["--config-file", str(config), str(tree)]) == 2
    assert "spmd-migrate: [spmd_mypy] groups: '*.tp_group' has no axis" in capsys.readouterr().err
