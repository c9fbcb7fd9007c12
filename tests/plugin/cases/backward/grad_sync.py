"""The data-parallel gradient sync written back to .grad, and an update with a gradient never synced."""
import torch

import spmd_stubs as spmd
from spmd_stubs import I, P, R, Tensor, V
from spmd_stubs.axes import dp, tp


def write_back(p: Tensor[R@dp, V@tp], w: Tensor[R@dp, R@tp], n: int, lr: float) -> None:
    assert p.grad is not None and w.grad is not None
    reveal_type(p.grad)  # N: Tensor[P@dp, V@tp]
    synced = spmd.all_reduce(p.grad, dp, src=P, dst=R)
    p.grad = synced
    p.grad = synced / n
    w.grad = spmd.all_reduce(w.grad, dp, src=P, dst=I)  # only dp reduced: the tp sum stays pending
    p.grad = spmd.all_gather(synced, tp, src=V, dst=R)  # E: assignment
    with torch.no_grad():
        p.add_(synced, alpha=-lr)


def never_synced(p: Tensor[R@dp, V@tp], lr: float) -> None:
    assert p.grad is not None
    with torch.no_grad():
        p.add_(p.grad, alpha=-lr)  # E: spmd-partial-affine
        p -= lr * p.grad  # E: spmd-partial-affine
