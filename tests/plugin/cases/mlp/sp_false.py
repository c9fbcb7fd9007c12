"""A typed tensor-parallel MLP without sequence parallelism: checks clean.

Inter-block activations are I@tp (and V@dp, which the layers never mention).
"""
import torch
import torch.nn.functional as F
from torch import nn

from spmd_stubs import I, P, R, S, Tensor, V, all_reduce, convert, reinterpret
from spmd_stubs.axes import dp, tp


class ColumnParallelLinear(nn.Module):
    weight: Tensor[S(0)@tp]
    bias: Tensor[S(0)@tp]

    def forward(self, x: Tensor[R@tp]) -> Tensor[V@tp]:
        return F.linear(x, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    weight: Tensor[S(1)@tp]
    bias: Tensor[I@tp]

    def forward(self, h: Tensor[V@tp]) -> Tensor[I@tp]:
        partial = reinterpret(F.linear(h, self.weight), tp, src=V, dst=P)
        return all_reduce(partial, tp, src=P, dst=I) + self.bias


class ParallelMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = ColumnParallelLinear()
        self.fc2 = RowParallelLinear()

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        h = F.gelu(self.fc1(convert(x, tp, src=I, dst=R)))
        return self.fc2(h)


class Block(nn.Module):
    norm_weight: Tensor[I@tp]
    norm_bias: Tensor[I@tp]

    def __init__(self) -> None:
        super().__init__()
        self.mlp = ParallelMLP()

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        normed = F.layer_norm(x, [1024], self.norm_weight, self.norm_bias)
        return x + self.mlp(normed)


def train_step(block: Block, x: Tensor[I@tp, V@dp], target: Tensor[I@tp, V@dp]) -> None:
    out = block(x)
    reveal_type(out)  # N: Tensor[V@dp, I@tp]
    loss = F.mse_loss(out, target)
    loss = reinterpret(loss, dp, src=V, dst=P)
    reveal_type(loss)  # N: Tensor[P@dp, I@tp]
    loss.backward()
