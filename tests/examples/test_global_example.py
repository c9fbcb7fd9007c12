"""The global-SPMD examples: they type-check clean, and the GPT has a global-mode boundary.

``examples/global_mlp.py`` holds small ``@spmd.global_spmd(tp)`` programs
(their values and gradients are checked against one device in
``tests/runtime/test_global_mode.py``); in ``examples/gpt/tp_gpt.py`` the
parallel linears and the MLP are global on tp, the rest local.
"""

from __future__ import annotations

import sys

from spmd_examples import EXAMPLES, GPT, MypyRun

from spmd_stubs.axes import tp
from spmd_stubs.regions import global_axes_of

sys.path.insert(0, str(GPT))
sys.path.insert(0, str(EXAMPLES))
import global_mlp
import tp_gpt


def test_global_example_type_checks_clean(example_mypy_run: MypyRun) -> None:
    assert example_mypy_run.clean("examples/global_mlp.py"), example_mypy_run.output


def test_vocab_parallel_softmax_type_checks_clean(example_mypy_run: MypyRun) -> None:
    assert example_mypy_run.clean("examples/vocab_parallel_softmax.py"), example_mypy_run.output


def test_gpt_example_has_a_global_mode_boundary() -> None:
    for fn in (tp_gpt.column_parallel, tp_gpt.row_parallel, tp_gpt.MLP.forward):
        assert global_axes_of(fn) == (tp,), fn.__qualname__
    for fn in (tp_gpt.Attention.forward, tp_gpt.Block.forward, tp_gpt.vocab_parallel_cross_entropy):
        assert global_axes_of(fn) == (), fn.__qualname__


def test_global_example_programs_are_global_on_tp() -> None:
    programs = [v for v in vars(global_mlp).values() if callable(v) and global_axes_of(v)]
    assert len(programs) == len(global_mlp.REFERENCES) and all(global_axes_of(p) == (tp,) for p in programs)
