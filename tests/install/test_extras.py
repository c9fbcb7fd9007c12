"""A command run where its extra is not installed says which extra to install, with exit status 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HIDE_AND_RUN = """\
import sys
for hidden in sys.argv[1].split(","):
    sys.modules[hidden] = None  # as if not installed: importing it raises ImportError
from spmd_mypy import commands
sys.exit(getattr(commands, sys.argv[2])(sys.argv[3:]))
"""


@pytest.mark.parametrize(("command", "hidden", "extra"), [
    ("check", "mypy", "mypy"),
    ("coverage", "mypy", "mypy"),
    ("migrate", "libcst", "migrate"),
])
def test_a_command_without_its_extra_names_the_extra(tmp_path: Path, command: str, hidden: str, extra: str) -> None:
    (tmp_path / "t.py").write_text("x = 1\n")
    done = subprocess.run([sys.executable, "-c", HIDE_AND_RUN, hidden, command, str(tmp_path / "t.py")],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert f"pip install 'spmd-types-mypy[{extra}]'" in done.stderr
    assert f"{hidden} not installed" in done.stderr


def test_the_installed_scripts_are_the_guarded_entry_points() -> None:
    from importlib import metadata

    scripts = {e.name: e.value for e in metadata.entry_points(group="console_scripts") if e.name.startswith("spmd-")}
    assert scripts == {"spmd-check": "spmd_mypy.commands:check", "spmd-coverage": "spmd_mypy.commands:coverage",
                       "spmd-migrate": "spmd_mypy.commands:migrate"}
