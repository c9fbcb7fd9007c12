"""Strict mode: a typed tensor passed to a torch module whose type the checker cannot complete is reported."""
from typing import Optional

from torch import nn

from spmd_stubs import I, R, S, Tensor, V
from spmd_stubs.axes import dp, tp


class ColumnLinear(nn.Linear):
    weight: Tensor[S(0)@tp, R@dp]  # type: ignore[assignment]
    bias: Optional[Tensor[S(0)@tp, R@dp]]  # type: ignore[assignment]


class WeightOnly(nn.Linear):
    weight: Tensor[S(0)@tp]  # type: ignore[assignment]


class Block(nn.Module):
    def forward(self, x: Tensor[R@tp]) -> Tensor[R@tp]:
        return x


def plain_linear(x: Tensor[I@tp]) -> None:
    up = nn.Linear(8, 8)
    reveal_type(up(x))  # E: spmd-untyped-boundary `nn.Linear`'s `weight`, `bias` have no SPMD type on axis tp, lost at a torch module's untyped parameter In `up(x)`: the Tensor[I@tp] it takes is judged by linear with them unknown # N: Tensor[I@tp]
    nn.Embedding(8, 8)(x)  # E: spmd-untyped-boundary Fix (needs your choice): declare `weight: Tensor[<type>@tp]` on a subclass of nn.Embedding


def declared(x: Tensor[R@tp, V@dp], r: Tensor[R@tp, R@dp], untyped: object) -> None:
    reveal_type(ColumnLinear(8, 8)(x))  # N: Tensor[V@dp, V@tp]
    WeightOnly(8, 8)(r)  # E: spmd-untyped-boundary `WeightOnly`'s `bias` has no SPMD type on axis dp, axis tp, lost at a torch module's untyped parameter In `WeightOnly(8, 8)(r)`: the Tensor[R@dp, R@tp] it takes is judged by linear with it unknown there. Fix (needs your choice): declare `bias: Tensor[<type>@dp, <type>@tp]` (`bias: None` where it has none) on WeightOnly # E: spmd-missing-axis operand 1 of linear is Tensor[S(0)@tp], which does not mention axis dp
    nn.Linear(8, 8)(untyped)
    nn.GELU()(x)


def containers(x: Tensor[R@tp], blocks: nn.Sequential, layers: nn.ModuleList) -> None:
    blocks(x)  # E: spmd-untyped-boundary `blocks` takes Tensor[R@tp], lost at a module container
    for layer in layers:
        layer(x)  # E: spmd-untyped-boundary `layer` takes Tensor[R@tp], lost at a module typed plain nn.Module
    for layer in layers:
        assert isinstance(layer, Block)
        reveal_type(layer(x))  # N: Tensor[R@tp]


def unmodelled(x: Tensor[R@tp]) -> None:
    nn.Conv1d(8, 8, 3)(x)  # E: spmd-unmodelled nn.Conv1d is not modelled by the SPMD checker
