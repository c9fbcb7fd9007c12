"""Fixed: the shared norm parameters enter the sequence-parallel region as R.

``convert(w, tp, src=I, dst=R)`` is the identity forward and all-reduces the
gradient backward, which is the missing reduction (docs/bugs.md).
"""

import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import I, R, S, Tensor
from spmd_stubs.axes import tp


def sp_layer_norm(x: Tensor[S(0)@tp], weight: Tensor[I@tp], bias: Tensor[I@tp]) -> Tensor[S(0)@tp]:
    """LayerNorm of this rank's sequence slice."""
    w = spmd.convert(weight, tp, src=I, dst=R)
    b = spmd.convert(bias, tp, src=I, dst=R)
    return F.layer_norm(x, x.shape[-1:], w, b)
