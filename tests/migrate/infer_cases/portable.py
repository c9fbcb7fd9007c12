"""A module written in the spelling every type checker reads (``R[tp]``, ``Sharded[Literal[0], tp]``).

What ``--infer`` writes into it is spelled so too, or pyright would then
reject the module's annotations (docs/checker.md#pyright-basedpyright-pyrefly-ty).
"""

from typing import Literal

from spmd_stubs import R, Sharded, Tensor
from spmd_stubs.axes import tp


def _rows_doubled(rows):
    return rows * 2


def _bias_plus_one(bias):
    return bias + 1


def forward(rows: Tensor[Sharded[Literal[0], tp]], bias: Tensor[R[tp]]) -> None:
    _rows_doubled(rows)
    _bias_plus_one(bias)
