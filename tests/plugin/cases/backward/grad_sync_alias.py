"""In-place writes through an alias of p.grad (docs/spec.md#writes-in-place): a gradient buffer takes the
gradient with its reductions done, as p.grad = ... does; a copy or another value does not."""
import torch

import spmd_stubs as spmd
from spmd_stubs import I, P, R, Tensor, V
from spmd_stubs.axes import dp, tp


def layernorm_grad(w: Tensor[R@tp, R@dp]) -> None:
    """Megatron's allreduce_layernorm_grads, one parameter: the tp sync written back into the buffer."""
    grad = w.grad
    assert grad is not None
    reveal_type(grad)  # N: Tensor[P@dp, P@tp]
    grad.copy_(spmd.all_reduce(grad, tp, src=P, dst=R))  # dp stays pending: its sync is elsewhere
    grad.copy_(spmd.all_reduce(grad, tp, src=P, dst=I))
    grad.copy_(grad * 0.5)
    assert w.grad is not None
    w.grad.copy_(spmd.all_reduce(w.grad, dp, src=P, dst=R))
    grad[0] = spmd.all_reduce(grad, tp, src=P, dst=R)[0]
    torch.div(spmd.all_reduce(grad, tp, src=P, dst=R), 2, out=grad)
    spmd.all_reduce_(grad, tp, src=P, dst=R)


def unflattened(params: list[Tensor[R@tp]]) -> None:
    """The coalesced form: the synced flat buffer unflattened and copied back, item by item."""
    grads = [p.grad for p in params if p.grad is not None]
    synced = [spmd.all_reduce(g, tp, src=P, dst=R) for g in grads]
    for buf, value in zip(grads, synced):
        reveal_type(buf)  # N: Tensor[P@tp]
        buf.copy_(value)
        value.copy_(buf)  # E: spmd-inplace writes y of type P@tp into x of type R@tp on axis tp
    for _, buf in enumerate(grads):
        buf.copy_(spmd.all_reduce(buf, tp, src=P, dst=R))


def unsynced(w: Tensor[I@tp], p: Tensor[R@tp], h: Tensor[P@tp], local: Tensor[V@tp]) -> None:
    grad = w.grad  # an Invariant parameter's gradient is whole on every rank already
    assert grad is not None
    grad.copy_(h)  # E: spmd-inplace Fix: all_reduce(y, tp, src=P, dst=I)
    pg = p.grad
    assert pg is not None
    pg.copy_(local)  # E: spmd-inplace Fix (needs your choice): reinterpret(y, tp, src=V, dst=P)


def not_an_alias(p: Tensor[R@tp], flag: bool) -> None:
    assert p.grad is not None
    copy = p.grad.clone()  # writes into a copy never reach the gradient: its name keeps P@tp
    copy.copy_(spmd.all_reduce(copy, tp, src=P, dst=R))  # E: spmd-inplace writes y of type R@tp into x of type P@tp
    spmd.all_reduce_(copy, tp, src=P, dst=R)  # E: spmd-inplace
    rebound = p.grad
    if flag:
        rebound = rebound * 2  # not every binding is the gradient buffer
    rebound.copy_(spmd.all_reduce(rebound, tp, src=P, dst=R))  # E: spmd-inplace
