"""Axis polymorphism: a function annotated on tp accepts and passes through other axes."""
import torch

from spmd_stubs import I, P, R, S, Tensor, V, reinterpret
from spmd_stubs.axes import cp, dp, tp


def column(x: Tensor[R@tp], w: Tensor[S(0)@tp]) -> Tensor[V@tp]:
    return x @ w.T


def row(h: Tensor[V@tp], w: Tensor[S(1)@tp]) -> Tensor[P@tp]:
    return reinterpret(h @ w.T, tp, src=V, dst=P)


def two_outputs(x: Tensor[R@tp]) -> tuple[Tensor[R@tp], Tensor[R@tp]]:
    return x, x


def passes_through(x: Tensor[R@tp, V@dp], w: Tensor[S(0)@tp], w2: Tensor[S(1)@tp], t: torch.Tensor) -> None:
    reveal_type(column(x, w))  # N: Tensor[V@dp, V@tp]
    reveal_type(row(column(x, w), w2))  # N: Tensor[V@dp, P@tp]
    reveal_type(two_outputs(x))  # N: tuple[torch._tensor.Tensor[V@dp, R@tp], torch._tensor.Tensor[V@dp, R@tp]]
    reveal_type(column(t, w))  # N: Tensor[V@tp]


def declared_axis_still_checked(x: Tensor[P@tp, V@dp], w: Tensor[S(0)@tp]) -> None:
    column(x, w)  # E: arg-type "Tensor[V@dp, P@tp]"; expected "Tensor[V@dp, R@tp]"


def both(a: Tensor[R@tp], b: Tensor[R@tp]) -> Tensor[R@tp]:
    return a * b


def disagreeing_extra_axes(
    v: Tensor[R@tp, V@dp], r: Tensor[R@tp, R@dp], p: Tensor[R@tp, P@dp], i: Tensor[R@tp, I@cp], i2: Tensor[R@tp, R@cp]
) -> None:
    reveal_type(both(v, v))  # N: Tensor[V@dp, R@tp]
    reveal_type(both(v, r))  # N: Tensor[V@dp, R@tp]
    reveal_type(both(p, p))  # N: Tensor[P@dp, R@tp]
    both(p, r)  # E: spmd-partial-nonlinear not annotated on dp
    both(i, i2)  # E: spmd-invariant-mix


class Layer:
    def __call__(self, x: Tensor[R@tp]) -> Tensor[R@tp]:
        return x

    def apply(self, x: Tensor[R@tp]) -> Tensor[R@tp]:
        return x


def methods(layer: Layer, x: Tensor[R@tp, V@dp]) -> None:
    reveal_type(layer.apply(x))  # N: Tensor[V@dp, R@tp]
    reveal_type(layer(x))  # N: Tensor[V@dp, R@tp]
