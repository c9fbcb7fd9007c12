"""The canonical ``S[0, tp]``: pyright, basedpyright and pyrefly accept it (as a bare ``S``); ty rejects it."""

from spmd_stubs import R, S, Tensor
from spmd_stubs.axes import dp, tp


def gather(x: Tensor[S[0, tp]]) -> Tensor[S[0, tp]]:
    return x


def row(h: Tensor[S[-1, tp], R[dp]]) -> None: ...
