"""The plugin's cache fingerprint covers everything its verdicts depend on.

mypy fingerprints only the plugin's entry module; the plugin adds a hash of
its own package and of the whole core to every module's cache metadata.  A
change of any rule (a shard-propagation rule in ``core/sharding`` included)
must change it, or users' cached verdicts go stale.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import sys
from pathlib import Path
from spmd_mypy import main
assert Path(main.__file__).is_relative_to(sys.argv[1]), main.__file__
before = main._code_version()
unchanged = []
for path in sorted(Path(sys.argv[1]).glob(sys.argv[2])):
    text = path.read_text()
    path.write_text(text + "# a changed rule\\n")
    if main._code_version() == before:
        unchanged.append(str(path))
    path.write_text(text)
assert main._code_version() == before
print(len(unchanged), unchanged)
"""


def _unchanged_by_editing(tmp_path: Path, pattern: str) -> str:
    for package in ("spmd_stubs", "spmd_mypy"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    run = subprocess.run(
        [sys.executable, "-c", _PROBE, str(tmp_path), pattern],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def test_every_core_file_is_in_the_fingerprint(tmp_path: Path) -> None:
    assert _unchanged_by_editing(tmp_path, "spmd_stubs/core/**/*.py") == "0 []"


def test_every_plugin_file_is_in_the_fingerprint(tmp_path: Path) -> None:
    assert _unchanged_by_editing(tmp_path, "spmd_mypy/**/*.py") == "0 []"
