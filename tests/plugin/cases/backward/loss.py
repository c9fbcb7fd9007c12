"""The loss rule: backward with the implicit seed needs I or P on every typed axis."""
import torch

from spmd_stubs import I, P, R, Tensor, V, all_gather, reinterpret
from spmd_stubs.axes import cp, dp, tp


def good(loss: Tensor[P@dp, I@tp, P@cp], g: Tensor[R@dp], x: torch.Tensor) -> None:
    loss.backward()
    torch.autograd.backward(loss)
    torch.autograd.grad(loss, [x])
    torch.autograd.grad([loss, loss], [x])


def bad(loss_r: Tensor[R@tp], loss_v: Tensor[V@dp], g: torch.Tensor, x: torch.Tensor) -> None:
    loss_r.backward()  # E: spmd-backward is R@tp on axis tp
    loss_v.backward()  # E: spmd-backward reinterpret(loss, dp, src=V, dst=P)
    torch.autograd.backward(loss_r)  # E: spmd-backward torch.autograd.backward()
    torch.autograd.grad(loss_v, [x])  # E: spmd-backward torch.autograd.grad()
    torch.autograd.grad([loss_v], [x])  # E: spmd-backward


def explicit_gradient(loss_r: Tensor[R@tp], g: torch.Tensor, x: torch.Tensor) -> None:
    loss_r.backward(g)
    loss_r.backward(gradient=g)
    torch.autograd.backward(loss_r, grad_tensors=g)
    torch.autograd.grad(loss_r, [x], grad_outputs=g)


def fixed(loss_v: Tensor[V@dp]) -> None:
    reinterpret(loss_v, dp, src=V, dst=P).backward()


def union_loss(flag: bool, a: Tensor[P@tp], b: Tensor[R@tp]) -> None:
    loss = a if flag else b
    loss.backward()  # E: spmd-backward R@tp
