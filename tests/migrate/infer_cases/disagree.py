"""A helper whose callers pass different types, picked by a run-time flag: the choice is the user's."""

from spmd_stubs import I, R, Tensor
from spmd_stubs.axes import tp


def _scale(x):
    return x * 2


def forward(a: Tensor[R@tp], b: Tensor[I@tp], use_a: bool) -> None:
    if use_a:
        _scale(a)
    else:
        _scale(b)
