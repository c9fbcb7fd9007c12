"""picotron: apply_tensor_parallel swaps each nn.Linear for a parallel layer once the model is built.

``modules`` declares the class each attribute holds at run time, so the
model's calls are checked against the parallel layers' typed forwards; the
constructor's ``nn.Linear`` assignments stay as written.
"""
import torch.nn.functional as F
from torch import nn

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor
from spmd_stubs.axes import tp


class ColumnParallelLinear(nn.Module):
    weight: Tensor[S(0)@tp]

    def forward(self, x: Tensor[I@tp]) -> Tensor[S(-1)@tp]:
        return F.linear(spmd.convert(x, tp, src=I, dst=R), self.weight)


class ColumnWithoutCopy(nn.Module):
    """The input's copy to the tensor-parallel region dropped: its gradient would miss the other ranks' parts."""

    weight: Tensor[S(0)@tp]

    def forward(self, x: Tensor[I@tp]) -> Tensor[S(-1)@tp]:
        return F.linear(x, self.weight)  # E: spmd-invariant-mix


class RowParallelLinear(nn.Module):
    weight: Tensor[S(1)@tp]

    def forward(self, x: Tensor[S(-1)@tp]) -> Tensor[I@tp]:
        return spmd.all_reduce(F.linear(x, self.weight), tp, src=P, dst=I)


class Attention(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, hidden, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        q = self.q_proj(x)
        reveal_type(q)  # N: Tensor[S(-1)@tp]
        reveal_type(self.k_proj)  # N: ColumnWithoutCopy
        return self.o_proj(q * q)


class TwiceReduced(Attention):
    """A subclass reads its base's swapped layers too: the row layer's output, already reduced, fed to
    another row layer as if it were still split."""

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        out = self.o_proj(self.q_proj(x))
        return self.o_proj(out)  # E: arg-type "Tensor[I@tp]"; expected "Tensor[S(-1)@tp]"


class ReducedOnce(Attention):
    def __init__(self, hidden: int) -> None:
        super().__init__(hidden)
        self.head_dim = self.q_proj.out_features  # in a constructor: its own nn.Linear, not yet swapped
        reveal_type(self.q_proj)  # N: Linear

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        return self.o_proj(self.q_proj(x))


class Llama(nn.Module):
    def __init__(self, layers: int, hidden: int) -> None:
        super().__init__()
        self.decoder_layers = nn.ModuleList([Attention(hidden) for _ in range(layers)])

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        reveal_type(self.decoder_layers[0])  # N: Attention
        for layer in self.decoder_layers:
            x = layer(x)
        for index, layer in enumerate(self.decoder_layers):
            reveal_type(layer)  # N: Attention
        return x


def apply_tensor_parallel(model: Llama) -> None:
    """picotron's swap: setattr by name, after construction."""
    for layer in model.decoder_layers:
        for name, style in (("q_proj", "column"), ("k_proj", "column"), ("o_proj", "row")):
            setattr(layer, name, ColumnParallelLinear() if style == "column" else RowParallelLinear())
    model.decoder_layers[0].q_proj = nn.Linear(4, 4)  # an assignment keeps mypy's type: nn.Linear
