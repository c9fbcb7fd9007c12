"""p.grad has the dual of p's type: R<->P, I<->I, V<->V, shards keep their dim."""
import torch

from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import dp, tp


def grads(w: Tensor[I@tp, R@dp], x: Tensor[P@tp, S(0)@dp], t: torch.Tensor) -> None:
    reveal_type(w.grad)  # N: Tensor[P@dp, I@tp] | None
    reveal_type(x.grad)  # N: Tensor[S(0)@dp, R@tp] | None
    reveal_type(t.grad)  # N: Tensor[Any] | None
