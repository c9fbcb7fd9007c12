"""spmd-backward: backward()/autograd.grad with the implicit seed on a loss that is not I or P on every axis."""
import torch.nn.functional as F

from spmd_stubs import I, P, R, S, Tensor, V, all_gather, reinterpret
from spmd_stubs.axes import dp, tp


def wrong(logits: Tensor[S(-1)@tp, V@dp], target: Tensor[R@tp, V@dp]) -> None:
    loss = F.cross_entropy(all_gather(logits, tp, src=S(-1), dst=R), target)
    loss.backward()  # E: spmd-backward is V@dp on axis dp # E: spmd-backward is R@tp on axis tp


def fixed(logits: Tensor[S(-1)@tp, V@dp], target: Tensor[I@tp, V@dp]) -> None:
    loss = F.cross_entropy(all_gather(logits, tp, src=S(-1), dst=I), target)
    loss = reinterpret(loss, dp, src=V, dst=P)
    reveal_type(loss)  # N: Tensor[P@dp, I@tp]
    loss.backward()
