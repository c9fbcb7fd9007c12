"""torchtitan: each block builds its feed-forward from its config (``config.build()``), typed as a plain
``nn.Module``; ``modules`` declares the class it builds, and the blocks' containers their items'."""
import torch.nn.functional as F
from torch import nn

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import tp


class FeedForward(nn.Module):
    w1: Tensor[S(0)@tp]
    w2: Tensor[S(1)@tp]

    def forward(self, x: Tensor[I@tp]) -> Tensor[P@tp]:
        hidden = F.silu(F.linear(spmd.convert(x, tp, src=I, dst=R), self.w1))
        return spmd.reinterpret(F.linear(hidden, self.w2), tp, src=V, dst=P)


class FeedForwardConfig:
    def build(self) -> nn.Module:
        return FeedForward()


class TransformerBlock(nn.Module):
    def __init__(self, config: FeedForwardConfig) -> None:
        super().__init__()
        self.feed_forward = config.build()

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        return x + spmd.all_reduce(self.feed_forward(x), tp, src=P, dst=I)


class UnreducedBlock(TransformerBlock):
    """The feed-forward's pending sum added to the residual without its all-reduce."""

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        return x + self.feed_forward(x)  # E: spmd-invariant-mix I@tp + P@tp


class Transformer(nn.Module):
    def __init__(self, config: FeedForwardConfig, layers: int) -> None:
        super().__init__()
        self.layers = nn.ModuleDict({str(index): TransformerBlock(config) for index in range(layers)})

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        for layer in self.layers.values():
            x = layer(x)
        for name, block in self.layers.items():
            reveal_type(block)  # N: TransformerBlock
        reveal_type(self.layers["0"])  # N: TransformerBlock
        return x


class Stages(nn.Module):
    def __init__(self, config: FeedForwardConfig) -> None:
        super().__init__()
        self.stages = nn.Sequential(TransformerBlock(config), TransformerBlock(config))

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        reveal_type(self.stages[0])  # N: TransformerBlock
        for stage in self.stages:
            x = stage(x)
        return x
