"""all_reduce_, the in-place sync: on a parameter's .grad (or a local bound to it) or an untyped tensor; not on
another typed one."""
import torch

import spmd_stubs as spmd
from spmd_stubs import I, P, R, Tensor, V
from spmd_stubs.axes import dp, tp


def sync_in_place(p: Tensor[R@dp, V@tp], w: Tensor[R@dp, R@tp], lr: float) -> None:
    assert p.grad is not None and w.grad is not None
    synced = spmd.all_reduce_(p.grad, dp, src=P, dst=R)
    reveal_type(synced)  # N: Tensor[R@dp, V@tp]
    reveal_type(p.grad)  # N: Tensor[P@dp, V@tp]
    spmd.all_reduce_(w.grad, dp, src=P, dst=I, op="avg")
    spmd.all_reduce_(w.grad, tp, src=R, dst=R)  # E: spmd-collective
    with torch.no_grad():
        p.add_(synced, alpha=-lr)


def flat_buffer(buffer: torch.Tensor) -> None:
    """An untyped tensor (a flat gradient buffer) has no type to keep."""
    spmd.all_reduce_(buffer, dp, src=P, dst=R)


def typed_local(h: Tensor[P@tp]) -> Tensor[R@tp]:
    y = spmd.all_reduce_(h, tp, src=P, dst=R)  # E: spmd-inplace
    return y


def aliased_gradient(p: Tensor[R@dp]) -> None:
    """A local bound to p.grad is the same buffer (backward/grad_sync_alias.py)."""
    assert p.grad is not None
    g = p.grad
    spmd.all_reduce_(g, dp, src=P, dst=R)
    copied = p.grad.clone()
    spmd.all_reduce_(copied, dp, src=P, dst=R)  # E: spmd-inplace


class Accumulator:
    grad: Tensor[P@dp]


def not_a_tensors_grad(acc: Accumulator) -> None:
    """Only a tensor's .grad reads as the pending gradient whatever was written: this one keeps P@dp."""
    spmd.all_reduce_(acc.grad, dp, src=P, dst=R)  # E: spmd-inplace
