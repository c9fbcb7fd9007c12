"""The spec's worked example (docs/spec.md#global-spmd): the row-parallel linear, local SPMD vs global SPMD."""
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import P, R, S, Tensor, V
from spmd_stubs.axes import tp


def row_parallel_local(h: Tensor[V@tp], w: Tensor[V@tp]) -> Tensor[P@tp]:
    out = F.linear(h, w)  # a local matmul per rank
    reveal_type(out)  # N: Tensor[V@tp]
    return spmd.reinterpret(out, tp, src=V, dst=P)  # "I do mean the global matmul"


@spmd.global_spmd(tp)
def row_parallel_global(h: Tensor[S(-1)@tp], w: Tensor[S(1)@tp]) -> Tensor[P@tp]:
    F.linear(h, w)  # E: spmd-sharded-contraction out_partial_axes=tp
    out = spmd.linear(h, w, out_partial_axes=tp)
    reveal_type(out)  # N: Tensor[P@tp]
    return out


@spmd.global_spmd(tp)
def row_parallel_reduced(h: Tensor[S(-1)@tp], w: Tensor[S(1)@tp]) -> Tensor[R@tp]:
    return spmd.all_reduce(spmd.linear(h, w, out_partial_axes=tp), tp, src=P, dst=R)
