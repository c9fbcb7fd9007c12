"""The @ form and the canonical form mean the same type; axes print sorted."""
from typing import cast

import torch

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import dp, tp
from spmd_stubs.axes import tp as tensor_axis

Activation = Tensor[R[tp], V[dp]]
Sharded = Tensor[S[0, tp]]
LastDim = Tensor[S[-1, tp]]


def headline(x: Tensor[R@tp, V@dp], y: Tensor[S(0)@tp], z: Tensor[spmd.P@tensor_axis]) -> None:
    reveal_type(x)  # N: Tensor[V@dp, R@tp]
    reveal_type(y)  # N: Tensor[S(0)@tp]
    reveal_type(z)  # N: Tensor[P@tp]


def canonical(x: Activation, y: Sharded, z: LastDim, w: Tensor[I[tp], P[dp]]) -> None:
    reveal_type(x)  # N: Tensor[V@dp, R@tp]
    reveal_type(y)  # N: Tensor[S(0)@tp]
    reveal_type(z)  # N: Tensor[S(-1)@tp]
    reveal_type(w)  # N: Tensor[P@dp, I@tp]


def same_type(x: Tensor[V@dp, R@tp]) -> Activation:
    return x


def shard_is_varying(x: Tensor[V@tp]) -> Tensor[S(1)@tp]:
    return x


def in_cast(t: torch.Tensor) -> None:
    reveal_type(cast(Tensor[P[tp]], t))  # N: Tensor[P@tp]


def multi_line(
    x: Tensor[
        R@tp,
        V@dp,
    ],
) -> None:
    reveal_type(x)  # N: Tensor[V@dp, R@tp]


class Layer:
    weight: Tensor[S(0)@tp]

    def forward(self, x: Tensor[R@tp]) -> Tensor[V@tp]:
        return x @ self.weight.T


def variable(x: torch.Tensor) -> None:
    y: Tensor[I@tp] = x
    reveal_type(y)  # N: Tensor[I@tp]


def shard_class(src: S) -> S:
    """A bare ``S`` is the class itself (a shard annotation needs its subscript)."""
    reveal_type(src)  # N: spmd_stubs.types.S
    reveal_type(S(0))  # N: spmd_stubs.types.S
    return src
