"""torch's own nn modules are judged as their functional form, with the parameters the receiver's class declares."""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor, V, all_reduce, convert
from spmd_stubs.axes import dp, tp


class ColumnLinear(nn.Linear):
    """A column-parallel layer: declarations only, so its calls are linear's."""

    weight: Tensor[S(0)@tp]
    bias: Optional[Tensor[S(0)@tp]]


class RowLinear(nn.Linear):
    weight: Tensor[S(1)@tp]
    bias: None


class SharedEmbedding(nn.Embedding):
    weight: Tensor[I@tp]


class SharedNorm(nn.LayerNorm):
    weight: Tensor[I@tp]
    bias: Tensor[I@tp]


class OwnForward(nn.Linear):
    """Defines its own forward: typed by it, as any module is."""

    weight: Tensor[S(0)@tp]

    def forward(self, input: Tensor[R@tp]) -> Tensor[V@tp]:  # type: ignore[override]
        return F.linear(input, self.weight)


def plain_modules(x: Tensor[R@tp, V@dp], v: Tensor[V@tp], ids: Tensor[R@tp], s: Tensor[S(0)@tp]) -> None:
    reveal_type(nn.Linear(8, 8)(x))  # N: Tensor[V@dp, R@tp]
    reveal_type(nn.Embedding(8, 8)(ids))  # N: Tensor[Any]
    reveal_type(nn.LayerNorm(8)(v))  # N: Tensor[V@tp]
    reveal_type(nn.Dropout(0.1)(v))  # N: Tensor[V@tp]
    reveal_type(nn.GELU()(x))  # N: Tensor[V@dp, R@tp]
    reveal_type(nn.Softmax(dim=-1)(v))  # N: Tensor[V@tp]
    reveal_type(nn.ReLU6()(v))  # N: Tensor[V@tp]
    reveal_type(nn.Identity()(s))  # N: Tensor[S(0)@tp]
    reveal_type(nn.Sequential(nn.GELU())(x))  # N: Any
    reveal_type(nn.Conv1d(8, 8, 3)(v))  # N: Tensor[Any]


def untyped_calls_keep_mypys_verdict(t: torch.Tensor) -> None:
    reveal_type(nn.Linear(8, 8)(t))  # N: Any
    reveal_type(nn.Identity()(t))  # N: Any


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = ColumnLinear(8, 32)
        self.act = nn.GELU()
        self.down = RowLinear(32, 8, bias=False)
        self.embed = SharedEmbedding(16, 8)
        self.norm = SharedNorm(8)
        self.own = OwnForward(8, 8)

    def declared(self, x: Tensor[R@tp], ids: Tensor[R@tp], i: Tensor[I@tp]) -> None:
        reveal_type(self.up(x))  # N: Tensor[V@tp]
        reveal_type(self.down(self.act(self.up(x))))  # N: Tensor[V@tp]
        reveal_type(self.embed(ids))  # N: Tensor[I@tp]
        reveal_type(self.norm(i))  # N: Tensor[I@tp]
        reveal_type(self.own(x))  # N: Tensor[V@tp]
        self.own(i)  # E: arg-type expected "Tensor[R@tp]"

    def wrong_return(self, x: Tensor[R@tp]) -> Tensor[R@tp]:
        return self.up(x)  # E: return-value "Tensor[V@tp]", expected "Tensor[R@tp]"

    def dropped_input_copy(self, x: Tensor[I@tp]) -> Tensor[V@tp]:
        return self.up(x)  # E: spmd-invariant-mix convert(x, tp, src=I, dst=R)

    def with_input_copy(self, x: Tensor[I@tp]) -> Tensor[V@tp]:
        return self.up(convert(x, tp, src=I, dst=R))

    def activation_of_partial(self, x: Tensor[R@tp]) -> Tensor[R@tp]:
        h = self.act(self.up(x))
        y = spmd.reinterpret(self.down(h), tp, src=V, dst=P)
        return self.act(y)  # E: spmd-partial-nonlinear

    def activation_of_sum(self, x: Tensor[R@tp]) -> Tensor[R@tp]:
        h = self.act(self.up(x))
        y = spmd.reinterpret(self.down(h), tp, src=V, dst=P)
        return self.act(all_reduce(y, tp, src=P, dst=R))

    def norm_of_partial(self, y: Tensor[P@tp]) -> None:
        self.norm(y)  # E: spmd-partial-nonlinear
        nn.Dropout(0.1)(y)  # E: spmd-partial-nonlinear

    def same_verdict_as_functional(self, y: Tensor[P@tp], x: Tensor[I@tp]) -> None:
        self.up(x)  # E: spmd-invariant-mix linear mixes Invariant with Varying on axis tp (I@tp, V@tp)
        F.linear(x, self.up.weight, self.up.bias)  # E: spmd-invariant-mix linear mixes Invariant with Varying on axis tp (I@tp, V@tp)


@spmd.global_spmd(tp)
def column_in_global(up: ColumnLinear, x: Tensor[R@tp]) -> None:
    reveal_type(up(x))  # N: Tensor[S(-1)@tp]
    reveal_type(F.linear(x, up.weight))  # N: Tensor[S(-1)@tp]
