"""Annotations the codemod writes are spelled the way the module spells its own (overlays and --infer alike)."""

import textwrap

import pytest

from spmd_mypy.migrate.overlay import ModuleOverlay, SpmdChoice, SpmdType, apply_overlay
from spmd_mypy.migrate.spelling import Spelling

MODULE = textwrap.dedent("""\
    from spmd_stubs import R, Tensor
    from spmd_stubs.axes import tp


    def typed(x: {written}) -> None: ...


    def helper(y):
        return y
    """)

OVERLAY = ModuleOverlay(functions={"helper": {
    "y": SpmdType.parse("S(0)@(dp,tp), R@cp", "y"),
    "return": SpmdType.parse(["Pavg@tp", "None"], "return"),
}})


@pytest.mark.parametrize(("written", "parameter", "returned"), [
    ("Tensor[R@tp]", "Tensor[R@cp, S(0)@(dp,tp)]", "Tensor[Pavg@tp] | None"),
    ("Tensor[R[tp]]", "Tensor[R[cp], Sharded[Literal[0], dp, tp]]", "Tensor[Pavg[tp]] | None"),
    ("Tensor[Sharded[Literal[1], tp]]", "Tensor[R[cp], Sharded[Literal[0], dp, tp]]", "Tensor[Pavg[tp]] | None"),
    ("Tensor[S[1, tp]]", "Tensor[R[cp], S[0, dp, tp]]", "Tensor[Pavg[tp]] | None"),
], ids=["at", "portable letters", "portable shard", "canonical shard"])
def test_an_annotation_takes_the_modules_spelling(written: str, parameter: str, returned: str) -> None:
    code = apply_overlay(MODULE.format(written=written), "m", OVERLAY)
    assert f"def helper(y: {parameter}) -> {returned}:\n" in code
    portable = "Sharded[" in parameter
    assert ("from typing import Literal\n" in code) == portable
    assert ("Sharded" in code.split("\n\n\n")[0]) == portable  # imported only where written


def test_a_module_without_annotations_gets_the_at_form() -> None:
    code = apply_overlay("def helper(y):\n    return y\n", "m", OVERLAY)
    assert "def helper(y: Tensor[R@cp, S(0)@(dp,tp)]) -> Tensor[Pavg@tp] | None:\n" in code


def test_a_flag_chosen_alias_is_portable_in_a_portable_module() -> None:
    """An alias is an expression, where only the bracket forms are read: canonical in an ``@`` module."""
    choice = SpmdChoice("sequence_parallel", SpmdType.parse("S(0)@tp", "then"), SpmdType.parse("I@tp", "else"))
    assert choice.alias(Spelling.AT) == (
        "_spmd_sequence_parallel_S_0_tp_I_tp = Tensor[S[0, tp]] if spmd_stubs.flags.sequence_parallel "
        "else Tensor[I[tp]]")
    assert choice.alias(Spelling.PORTABLE) == (
        "_spmd_sequence_parallel_S_0_tp_I_tp = Tensor[Sharded[Literal[0], tp]] if spmd_stubs.flags.sequence_parallel "
        "else Tensor[I[tp]]")
