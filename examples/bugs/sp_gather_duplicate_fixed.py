"""Fixed: gather with dst=I (backward: keep this rank's slice), as duplicated work needs."""

import spmd_stubs as spmd
from spmd_stubs import I, S, Tensor
from spmd_stubs.axes import tp


def output_head(x: Tensor[S(0)@tp], weight: Tensor[I@tp]) -> Tensor[I@tp]:
    """Gather the sequence and apply a head that every tp rank computes in full."""
    full = spmd.all_gather(x, tp, src=S(0), dst=I)
    return full @ weight.T
