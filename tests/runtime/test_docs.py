"""docs/collectives.md's tables agree with the algebra and the Megatron helpers."""

from __future__ import annotations

import re
from pathlib import Path

from spmd_stubs import core, megatron
from spmd_stubs.core import AxisType, backward_of

DOC = (Path(__file__).resolve().parents[2] / "docs" / "collectives.md").read_text()


def _section(begin: str, end: str) -> list[str]:
    body = DOC.split(begin, 1)[1].split(end, 1)[0]
    return [line for line in body.strip().splitlines()[2:]]  # after header and rule


def test_transition_table_is_the_algebras() -> None:
    expected = []
    for row in core.TRANSITIONS:
        s, d = row.src.value, row.dst.value
        back = backward_of(row.op, AxisType(row.src), AxisType(row.dst))
        expected.append(
            f"| {row.op}({s},{d}) | {s} -> {d} | {'yes' if row.gated else 'no'} "
            f"| {back} | {back.src} -> {back.dst} |"
        )
    assert _section("<!-- transitions:begin -->", "<!-- transitions:end -->") == expected


def test_megatron_table_lists_every_helper() -> None:
    rows = re.findall(r"^\| (\w+)(?: \([^)]*\))? \| (\w+\(x, \w+, src=.+\)) \|$", DOC, re.M)
    documented = {name for name, _ in rows}
    assert documented == set(megatron.__all__)
    # The module docstring carries the same mapping.
    for name, call in rows:
        assert call in (megatron.__doc__ or ""), (name, call)
