"""spmd-migrate's command line: modes, summary, idempotence, never touching what it was not asked to."""

import io
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spmd_mypy.migrate import batch
from spmd_mypy.migrate.cli import main
from spmd_mypy.migrate.transformer import MigrateCommand

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


def test_output_dir_keeps_the_package_layout_of_single_files(tree: Path, tmp_path: Path) -> None:
    """Copies keep their paths below the directory the PATHs' packages share (or the --root)."""
    (tree / "pkg" / "sub").mkdir()
    (tree / "pkg" / "sub" / "__init__.py").write_text("")
    (tree / "pkg" / "sub" / "layer.py").write_text(SOURCE)
    (tree / "namespace").mkdir()
    (tree / "namespace" / "layer.py").write_text(SOURCE)
    out = tmp_path / "out"
    assert main(["--output-dir", str(out), "--quiet", str(tree / "pkg" / "layer.py"),
                 str(tree / "pkg" / "sub" / "layer.py")]) == 0
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.py")) == ["pkg/layer.py", "pkg/sub/layer.py"]
    assert "spmd.all_reduce" in (out / "pkg" / "sub" / "layer.py").read_text()
    rooted = tmp_path / "rooted"
    assert main(["--output-dir", str(rooted), "--quiet", "--root", str(tree), str(tree / "namespace" / "layer.py")]) == 0
    assert [p.relative_to(rooted).as_posix() for p in rooted.rglob("*.py")] == ["namespace/layer.py"]


def test_a_file_that_does_not_parse_is_named_and_the_others_are_migrated(tree: Path, capsys) -> None:
    """Its path, line and the reason; the others are migrated, with and without workers; exit status 2."""
    _many_files(tree, 11)
    broken = tree / "pkg" / "broken.py"
    broken.write_text("x = 1\ny = (\nz = 2\n")
    assert main(["-j", "1", str(tree)]) == 2
    serial = capsys.readouterr()
    assert f"{broken}:2: failed: syntax error: '(' was never closed\n" in serial.err
    assert "Traceback" not in serial.err
    assert serial.err.endswith("spmd-migrate: 1 files failed (named above) and were left as they were; "
                               "the others were migrated\n")
    assert serial.out.count("+++ b/") == 6  # layer.py and the five odd layer_N.py, which come after broken.py
    assert main(["-j", "3", str(tree)]) == 2
    assert capsys.readouterr() == serial
    assert main(["--in-place", "--quiet", str(tree)]) == 2
    assert "spmd.all_reduce" in (tree / "pkg" / "layer.py").read_text()
    assert broken.read_text() == "x = 1\ny = (\nz = 2\n"


def test_an_internal_error_names_the_file_and_shows_its_traceback(tree: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(MigrateCommand, "leave_Call", broken)
    assert main(["-j", "1", str(tree)]) == 2
    err = capsys.readouterr().err
    assert f"{tree / 'pkg' / 'layer.py'}: failed: internal error: RuntimeError: a bug\nTraceback" in err


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


def test_stdout_holds_only_the_diff_and_stderr_the_sites(tree: Path, capsys) -> None:
    """The site list goes to stderr, so ``spmd-migrate src/ > fix.patch`` is a patch and nothing else."""
    assert main([str(tree)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("--- a/") and "rewritten:" not in out and "todo:" not in out
    assert all(line[:1] in " +-@" for line in out.splitlines()), out
    layer = tree / "pkg" / "layer.py"
    assert f"{layer}:6: rewritten: spmd.all_reduce(x, tp, src=P, dst=I)\n" in err
    assert f"{layer}:8: todo: choose the type of the replicated result" in err


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)


@pytest.mark.parametrize("text", [
    SOURCE,
    SOURCE.rstrip("\n"),  # the changed line is the last one, without a newline
    SOURCE.replace("\n", "\r\n"),
    SOURCE.replace("# A comment", "\x0c\n# A comment"),  # a form feed, which str.splitlines splits at
], ids=["newline at the end", "no newline at the end", "CRLF", "form feed"])
def test_git_apply_takes_the_diff(tree: Path, text: str, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """``a/`` and ``b/`` prefixes, paths from the current directory: ``git apply`` needs no ``-p0``.

    Lines as git counts them (ending at ``\\n``, ``\\ No newline at end of
    file`` after a last one without), line endings as the file has them.
    """
    repo = tree.parent
    (tree / "pkg" / "layer.py").write_bytes(text.encode())
    assert _git(repo, "init", "-q").returncode == 0
    assert _git(repo, "config", "core.autocrlf", "false").returncode == 0
    monkeypatch.chdir(repo)
    assert main(["src"]) == 0
    patch = capsys.readouterr().out
    assert patch.startswith("--- a/src/pkg/layer.py\n+++ b/src/pkg/layer.py\n"), patch
    (repo / "fix.patch").write_text(patch)
    checked = _git(repo, "apply", "--check", "fix.patch")
    assert checked.returncode == 0, checked.stderr
    assert _git(repo, "apply", "fix.patch").returncode == 0
    assert main(["--check", "src"]) == 0  # what git applied is what --in-place writes
    capsys.readouterr()
    applied = (tree / "pkg" / "layer.py").read_bytes()
    (tree / "pkg" / "layer.py").write_bytes(text.encode())
    assert main(["--in-place", "src"]) == 0
    assert (tree / "pkg" / "layer.py").read_bytes() == applied
    capsys.readouterr()


def test_check_fails_while_something_would_change(tree: Path, capsys) -> None:
    assert main(["--check", str(tree)]) == 1
    out, err = capsys.readouterr()
    assert "+    y = spmd.all_reduce(x, tp, src=P, dst=I)  # reduce\n" in out
    assert "spmd-migrate --check: 1 files would change" in err
    assert (tree / "pkg" / "layer.py").read_text() == SOURCE  # nothing written
    assert main(["--in-place", str(tree)]) == 0
    capsys.readouterr()
    assert main(["--check", str(tree)]) == 0  # the TODO it left is there: nothing more to do
    out, err = capsys.readouterr()
    assert out == "" and "would change" not in err


def _many_files(tree: Path, count: int) -> None:
    for number in range(count):
        text = SOURCE.replace("def forward", f"def forward_{number}") if number % 2 else "x = 1\n"
        (tree / "pkg" / f"layer_{number}.py").write_text(text)


def test_jobs_give_the_same_output_in_the_same_order(tree: Path, capsys) -> None:
    _many_files(tree, 11)
    assert main(["-j", "1", str(tree)]) == 0
    serial = capsys.readouterr()
    assert main(["-j", "3", str(tree)]) == 0  # 13 files: three workers
    assert capsys.readouterr() == serial
    assert serial.err.count(": rewritten: ") == 6


def test_jobs_write_in_place_like_one_process(tree: Path, tmp_path: Path) -> None:
    _many_files(tree, 11)
    out_one, out_three = tmp_path / "one", tmp_path / "three"
    assert main(["-j", "1", "--quiet", "--output-dir", str(out_one), str(tree)]) == 0
    assert main(["-j", "3", "--quiet", "--output-dir", str(out_three), str(tree)]) == 0
    written = sorted(p.relative_to(out_one) for p in out_one.rglob("*.py"))
    assert written == sorted(p.relative_to(out_three) for p in out_three.rglob("*.py"))
    assert all((out_one / p).read_text() == (out_three / p).read_text() for p in written)


def test_a_bad_job_count_is_an_error(tree: Path, capsys) -> None:
    assert main(["-j", "0", str(tree)]) == 2
    assert "--jobs must be at least 1" in capsys.readouterr().err


def test_progress_on_a_large_tree(tree: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """Without a terminal, a line every PROGRESS_EVERY files; ``--quiet`` prints none."""
    monkeypatch.setattr(batch, "PROGRESS_EVERY", 5)
    _many_files(tree, 10)
    assert main(["-j", "1", str(tree)]) == 0
    err = capsys.readouterr().err
    assert "spmd-migrate: 5/12 files\n" in err and "spmd-migrate: 10/12 files\n" in err
    assert main(["-j", "1", "--quiet", str(tree)]) == 0
    assert "files\n" not in capsys.readouterr().err.replace("files changed\n", "")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_is_one_line_cleared_before_other_output() -> None:
    terminal = _Terminal()
    progress = batch.Progress(3, stream=terminal)
    progress.step()
    assert terminal.getvalue() == "\rspmd-migrate: 1/3 files\x1b[K"
    progress.clear()
    assert terminal.getvalue().endswith("\r\x1b[K")
    progress.clear()  # nothing shown, nothing cleared
    assert terminal.getvalue().count("\r\x1b[K") == 1


def test_the_pre_commit_hook_runs_the_check(tree: Path, capsys) -> None:
    """.pre-commit-hooks.yaml's spmd-migrate-check: its entry, given the staged files, fails until they are migrated."""
    hooks = (Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml").read_text()
    assert "- id: spmd-migrate-check\n" in hooks
    entry = re.search(r"^\s+entry: (.*)$", hooks, re.M)[1].split()  # type: ignore[index]
    assert entry[0] == "spmd-migrate"
    staged = [str(tree / "pkg" / "layer.py"), str(tree / "pkg" / "__init__.py")]
    assert main([*entry[1:], *staged]) == 1
    assert main(["--in-place", *staged]) == 0
    assert main([*entry[1:], *staged]) == 0
    capsys.readouterr()
