"""Every documented program with its checker output: the output is what mypy really prints.

A ``python`` block followed by a plain block starting ``t.py:`` (README.md,
docs/*.md) is saved as ``t.py`` and checked by mypy with the plugin under the
recommended config (with ``show_fixes`` where the output shows a fix as an edit); the documented lines must be exactly mypy's lines (the
docs wrap long lines, so whitespace is compared loosely).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.plugin.harness import ROOT, config_text, run_mypy

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A program holds no fence: a python block without output is not glued to a later one.
EXAMPLE = re.compile(r"```python\n(?P<program>(?:(?!```).)*?)```\s*```\n(?P<output>t\.py:.*?)```", re.S)


def _examples() -> list[tuple[str, str, str]]:
    found = []
    for doc in DOCS:
        for number, match in enumerate(EXAMPLE.finditer(doc.read_text())):
            found.append((f"{doc.name}#{number}", match["program"], match["output"]))
    return found


def _words(text: str) -> list[str]:
    return text.split()


def test_the_docs_show_checked_examples() -> None:
    assert {name.partition("#")[0] for name, _, _ in _examples()} >= {"README.md", "global.md"}


@pytest.mark.parametrize(("name", "program", "output"), _examples(), ids=[e[0] for e in _examples()])
def test_documented_output_is_the_checkers(name: str, program: str, output: str, tmp_path: Path,
                                           pytestconfig: pytest.Config) -> None:
    (tmp_path / "t.py").write_text(program)
    config = tmp_path / "mypy.ini"
    # Documented output that only a setting prints (a fix as an edit; a strict-only code) is checked with it.
    settings = {"show_fixes": "Fix as an edit" in output,
                "strict": any(f"[{code}]" in output for code in ("spmd-untyped-boundary", "spmd-unmodelled"))}
    config.write_text(config_text("[spmd_mypy]\n" + "".join(f"{key} = true\n" for key, on in settings.items() if on)))
    cache = pytestconfig.cache.mkdir("docs-examples-mypy") if pytestconfig.cache else tmp_path / "cache"
    printed = run_mypy([Path("t.py")], config, cache, cwd=tmp_path)
    assert _words(printed) == _words(output), printed
