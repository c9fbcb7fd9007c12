"""Pipeline stages in megatron's shape (p2p_communication's send_forward / recv_forward / send_backward /
recv_backward, a 1F1B step): the activation crossing stages declared once as a Boundary's type; each stage
sends what its neighbour expects, and the gradient crosses back with the dual type."""
import torch

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import dp, pp, tp

Activation = Tensor[V[pp], S[0, dp], I[tp]]  # an alias: the canonical form
ACTIVATION: spmd.Boundary[Activation] = spmd.Boundary(pp)


def stage(x: Activation, w1: Tensor[R@pp, R@dp, S(0)@tp], w2: Tensor[R@pp, R@dp, S(1)@tp]) -> Activation:
    h = torch.relu(spmd.convert(x, tp, src=I, dst=R) @ w1.T)
    return spmd.all_reduce(h @ w2.T, tp, src=P, dst=I)


def forward_step(w1: Tensor[R@pp, R@dp, S(0)@tp], w2: Tensor[R@pp, R@dp, S(1)@tp], batch: int, width: int) -> None:
    x = ACTIVATION.recv((batch, width), torch.float32)
    reveal_type(x)  # N: Tensor[S(0)@dp, V@pp, I@tp]
    ACTIVATION.send(stage(x, w1, w2))


def backward_step(x: Activation, y: Activation, batch: int, width: int) -> None:
    grads = ACTIVATION.gradient()
    reveal_type(grads)  # N: spmd_stubs.pipeline.Boundary[torch._tensor.Tensor[S(0)@dp, V@pp, I@tp]]
    y.backward(grads.recv((batch, width), torch.float32))
    assert x.grad is not None
    grads.send(x.grad)


def sends_each_ranks_part(x: Activation, w1: Tensor[R@pp, R@dp, S(0)@tp], w2: Tensor[R@pp, R@dp, S(1)@tp]) -> None:
    h = torch.relu(spmd.convert(x, tp, src=I, dst=R) @ w1.T)
    ACTIVATION.send(h @ w2.T)  # E: arg-type Argument 1 to "send" of "Boundary" has incompatible type "Tensor[V@dp, V@pp, V@tp]"; expected "Tensor[S(0)@dp, V@pp, I@tp]"


Replicated = Tensor[V[pp], R[tp]]
REPLICATED: spmd.Boundary[Replicated] = spmd.Boundary(pp)


def replicated_gradient() -> None:
    reveal_type(REPLICATED.gradient())  # N: spmd_stubs.pipeline.Boundary[torch._tensor.Tensor[V@pp, P@tp]]
