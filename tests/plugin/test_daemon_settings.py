"""A running daemon and edits of ``[spmd_mypy]``: ``dmypy run`` reports what a fresh run reports.

mypy's daemon reads its settings when it starts; ``dmypy run`` restarts it
when they changed (spmd_mypy/settings_digest.py), so after each edit of the
plugin's section its diagnostics must be a fresh ``mypy`` run's, and a bad
value must be the same one error (exit status 2), never a crashed daemon.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

SOURCE = """\
from spmd_stubs import I, P, R, Tensor
from spmd_stubs.axes import tp


def unmodelled(x: Tensor[R@tp]) -> Tensor[R@tp]:
    return x.map_(x, max)


def bias(p: Tensor[P@tp], r: Tensor[I@tp]) -> Tensor[I@tp]:
    return p + r
"""

SETTINGS = [
    "strict = false",
    "strict = true\nshow_fixes = true",  # the strict-only diagnostic and the fix notes appear
    "strict = maybe",  # one error naming the value, exit status 2
]
"""Each edit restarts the daemon, which then analyses torch again (its plugin changed): three are enough."""


def _said(done: subprocess.CompletedProcess[str]) -> tuple[int, list[str]]:
    """The exit status and the diagnostics and errors, without the daemon's own progress lines."""
    lines = (done.stdout + done.stderr).splitlines()
    kept = [line for line in lines if line.startswith(("t.py:", "daemon.ini:"))]
    return done.returncode, sorted(kept)


def test_dmypy_run_follows_every_edit_of_the_settings(tmp_path: Path, kept_dir: Callable[[str], Path]) -> None:
    (tmp_path / "t.py").write_text(SOURCE)
    config = tmp_path / "daemon.ini"
    cache = kept_dir("spmd_mypy") / "daemon_settings_cache"
    environment = {**os.environ, "MYPY_FORCE_COLOR": "0"}

    def run(*command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", *command], capture_output=True, text=True, cwd=tmp_path,
                              env=environment)

    daemon = ("mypy.dmypy", "--status-file", str(tmp_path / ".dmypy.json"))
    arguments = ("--", "--config-file", "daemon.ini", "--cache-dir", str(cache), "--no-error-summary")
    try:
        for settings in SETTINGS:
            config.write_text(f"[mypy]\nplugins = spmd_mypy\n[spmd_mypy]\n{settings}\n")
            through_daemon = run(*daemon, "run", *arguments, "t.py")
            fresh = run("mypy", *arguments[1:], "t.py")
            said = "\n".join((through_daemon.stdout, through_daemon.stderr))
            assert "Traceback" not in said and "crashed" not in said, said
            assert _said(through_daemon) == _said(fresh), f"after {settings!r}:\n{said}\n---\n{fresh.stdout}"
    finally:
        run(*daemon, "kill")
