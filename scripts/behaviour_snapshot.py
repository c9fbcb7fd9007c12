"""Record what the checker says over every case file and example, to compare a refactor byte for byte.

    python scripts/behaviour_snapshot.py save BEFORE_DIR     # on the commit before the change
    python scripts/behaviour_snapshot.py compare BEFORE_DIR  # after it: exit 1 and a diff on any change

Each case directory runs as the test suite runs it (its ``_extra.ini``, through
``spmd-check`` where it declares configurations), once more with ``show_fixes``
(the machine-readable fix notes), and the examples run under
``examples/mypy.ini``.  Outputs are mypy's full reports, notes included;
paths are relative, so two checkouts compare equal.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.plugin.conftest import EXTRA_CONFIG, group_of  # noqa: E402
from tests.plugin.harness import CASES, case_files, config_text, run_mypy  # noqa: E402

_EXAMPLES = ("examples/gpt", "examples/train_mlp.py", "examples/global_mlp.py",
             "examples/vocab_parallel_softmax.py", "examples/bugs")


def _runs(work: Path) -> dict[str, str]:
    """name -> mypy's report, for every case group (plain and with fixes) and the examples."""
    cache = work / "cache"
    outputs: dict[str, str] = {}
    groups = sorted({group_of(case) for case in case_files()})
    for group in groups:
        files = [f for f in case_files(group) if group_of(f) == group]
        extra = group / EXTRA_CONFIG
        sections = extra.read_text() if extra.exists() else ""
        name = "default" if group == CASES else group.name
        for variant, more in (("", ""), ("+fixes", "\n[spmd_mypy]\nshow_fixes = true\n")):
            if more and "[spmd_mypy]" in sections:
                text = sections.replace("[spmd_mypy]\n", "[spmd_mypy]\nshow_fixes = true\n", 1)
            else:
                text = sections + more
            config = work / f"{name}{variant}.ini"
            config.write_text(config_text(text))
            outputs[f"cases/{name}{variant}"] = run_mypy(
                files, config, cache, CASES, every_configuration="configurations" in text)
    examples = [ROOT / path for path in _EXAMPLES]
    outputs["examples"] = run_mypy(examples, ROOT / "examples" / "mypy.ini", cache, ROOT, every_configuration=True)
    return outputs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("save", "compare"))
    parser.add_argument("directory", type=Path)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        outputs = _runs(Path(work))
    if arguments.action == "save":
        arguments.directory.mkdir(parents=True, exist_ok=True)
        for name, text in outputs.items():
            target = arguments.directory / f"{name}.txt"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        print(f"saved {len(outputs)} reports in {arguments.directory}")
        return 0
    changed = 0
    for name, text in outputs.items():
        before = (arguments.directory / f"{name}.txt").read_text()
        if before != text:
            changed += 1
            sys.stdout.writelines(difflib.unified_diff(before.splitlines(True), text.splitlines(True),
                                                       f"before/{name}", f"after/{name}"))
    print(f"{len(outputs) - changed} of {len(outputs)} reports identical")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
