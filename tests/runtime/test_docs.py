"""What the docs say the runtime does: docs/collectives.md's tables and messages, docs/types.md's check_function.

The tables agree with the algebra and the Megatron helpers; the messages
collectives.md shows are the ones raised; the program of types.md's
"Testing your own autograd Function" fails with exactly the report shown
after it (the block marked ``<!-- checked by tests/runtime/test_docs.py -->``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from spmd_world import SimWorld

import spmd_stubs as spmd
from spmd_stubs import P, R, V, core, megatron
from spmd_stubs.axes import cp, tp
from spmd_stubs.core import AxisType, backward_of

DOCS = Path(__file__).resolve().parents[2] / "docs"
DOC = (DOCS / "collectives.md").read_text()


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


def _blocks(text: str) -> list[str]:
    return re.findall(r"^```[a-z]*\n(.*?)^```$", text, re.S | re.M)


def _words(text: str) -> list[str]:
    return text.split()


def _raised(call: object) -> str:
    with pytest.raises(Exception) as raised:  # SpmdTypeError, UnboundAxisError: the message is the test
        call()  # type: ignore[operator]
    return str(raised.value)


def test_the_error_messages_are_the_raised_ones(sim: SimWorld) -> None:
    """The Errors, Expert mode and binding sections show the messages word for word (the docs wrap them).

    The simulated world binds dp and tp, not cp.
    """
    x = torch.ones(2)
    invalid, no_gather = _raised(lambda: spmd.reinterpret(x, tp, src=P, dst=R)), \
        _raised(lambda: spmd.all_gather(x, tp, src=P, dst=R))
    gated = _raised(lambda: spmd.convert(x, tp, src=V, dst=P))
    unbound = _raised(lambda: spmd.all_reduce(x, cp, src=P, dst=R))
    shown = [_words(block) for block in _blocks(DOC)]
    assert _words(invalid + "\n" + no_gather) in shown
    assert _words(gated) in shown
    assert _words(unbound) in shown


def test_check_function_fails_as_types_md_shows(sim: SimWorld) -> None:
    doc = (DOCS / "types.md").read_text()
    section = doc.split("## Testing your own autograd Function", 1)[1]
    program = re.search(r"```python\n(.*?)```", section, re.S)[1]  # type: ignore[index]
    shown = section.split("<!-- checked by tests/runtime/test_docs.py -->\n```\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, object] = {}
    exec(compile(program, "types.md", "exec"), namespace)
    with pytest.raises(AssertionError) as failure:
        namespace["test_copy_to_region"]()  # type: ignore[operator]
    assert _words(f"AssertionError: {failure.value}") == _words(shown)
