"""spmd-sharded-contraction: in global SPMD, a contraction or reduction over a dim sharded on the axis without out_partial_axes (Partial is never produced implicitly)."""
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import P, R, S, Tensor
from spmd_stubs.axes import tp


@spmd.global_spmd(tp)
def wrong(h: Tensor[S(-1)@tp], w: Tensor[S(1)@tp]) -> Tensor[R@tp]:
    y = F.linear(h, w)  # E: spmd-sharded-contraction linear contracts over a dim sharded on global axis tp (S(-1)@tp, S(1)@tp)
    return spmd.all_reduce(y, tp, src=P, dst=R)


@spmd.global_spmd(tp)
def fixed(h: Tensor[S(-1)@tp], w: Tensor[S(1)@tp]) -> Tensor[R@tp]:
    y = spmd.linear(h, w, out_partial_axes=tp)
    reveal_type(y)  # N: Tensor[P@tp]
    return spmd.all_reduce(y, tp, src=P, dst=R)
