"""Fixed: reduce the partial products first, then add the bias once."""

import spmd_stubs as spmd
from spmd_stubs import I, P, S, Tensor, V
from spmd_stubs.axes import tp


def row_parallel_linear(x: Tensor[S(-1)@tp], weight: Tensor[S(1)@tp], bias: Tensor[I@tp]) -> Tensor[I@tp]:
    """``x @ W.T + b`` with the contraction dim split over tp."""
    partial = spmd.reinterpret(x @ weight.T, tp, src=V, dst=P)
    return spmd.all_reduce(partial, tp, src=P, dst=I) + bias
