"""A block whose activation layout the sequence-parallel flag chooses, and its unannotated helpers.

``Activation`` is ``S(0)@tp`` where sequence parallelism is on (configuration
``sp``) and ``I@tp`` where it is off (``no_sp``).  ``_scaled`` is passed an
``Activation``: in each configuration a different type, which the alias
says.  ``_bias_added`` is passed ``R@tp`` in both.  ``_picked`` is passed
``S(-1)@tp`` in one and ``R@tp`` in the other, which no alias in scope says.
``_halved`` is passed a tensor in one and a float in the other.
"""

import spmd_stubs as spmd
from spmd_stubs import I, R, S, Tensor
from spmd_stubs.axes import tp

Activation = Tensor[S[0, tp]] if spmd.flags.sequence_parallel else Tensor[I[tp]]


def _scaled(x):
    return x * 2


def _bias_added(b):
    return b + 1


def _picked(z):
    return z


def _halved(v):
    return v / 2


def block(x: Activation, b: Tensor[R@tp], w: Tensor[S(-1)@tp], r: Tensor[R@tp]) -> Activation:
    _bias_added(b)
    _picked(w if spmd.flags.sequence_parallel else r)
    _halved(w if spmd.flags.sequence_parallel else 2.0)
    return _scaled(x)
