"""Fixed: reduce the sharded part over tp, add the duplicated part once."""

import spmd_stubs as spmd
from spmd_stubs import I, P, S, Tensor, V
from spmd_stubs.axes import tp


def global_grad_norm(sharded_grad: Tensor[S(0)@tp], duplicated_grad: Tensor[I@tp]) -> Tensor[I@tp]:
    """L2 norm of the gradients of one tp-sharded and one tp-duplicated parameter."""
    squares = spmd.reinterpret(sharded_grad.pow(2).sum(), tp, src=V, dst=P)
    return (spmd.all_reduce(squares, tp, src=P, dst=I) + duplicated_grad.pow(2).sum()).sqrt()
