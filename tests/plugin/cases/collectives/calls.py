"""Typed collectives beyond single src/dst pairs: tuple axes, unknown and union inputs, spellings."""
import torch

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor, V, all_gather, all_reduce, convert
from spmd_stubs.axes import cp, dp, tp


def flattened(loss: Tensor[P@dp, P@cp, I@tp]) -> None:
    reveal_type(all_reduce(loss, (dp, cp), src=P, dst=R))  # N: Tensor[R@cp, R@dp, I@tp]
    all_reduce(loss, (dp, tp), src=P, dst=R)  # E: spmd-collective told src=P, but the input is I@tp


def implicit_source(x: Tensor[P@tp], v: Tensor[V@tp]) -> None:
    reveal_type(all_reduce(x, tp, dst=I))  # N: Tensor[I@tp]
    reveal_type(spmd.reduce_scatter(x, tp, dst=S(0)))  # N: Tensor[S(0)@tp]
    reveal_type(all_reduce(v, tp, src=V, dst=R))  # N: Tensor[R@tp]
    reveal_type(all_reduce(v, tp, dst=R))  # N: Tensor[R@tp]
    all_reduce(x, tp, src=V, dst=R)  # E: spmd-collective is told src=V, but the input is P@tp


def refines_unknown(t: torch.Tensor) -> None:
    reveal_type(convert(t, tp, src=I, dst=R))  # N: Tensor[R@tp]
    reveal_type(all_gather(t, tp, src=S(-1), dst=I))  # N: Tensor[I@tp]


def shard_and_varying_agree(x: Tensor[S(0)@tp], v: Tensor[V@tp]) -> None:
    reveal_type(all_gather(x, tp, src=V, dst=R))  # N: Tensor[R@tp]
    reveal_type(all_gather(v, tp, src=S(0), dst=R))  # N: Tensor[R@tp]


def union_input(flag: bool, a: Tensor[P@tp], b: Tensor[R@tp]) -> None:
    x = a if flag else b
    reveal_type(x)  # N: Tensor[P@tp] | torch._tensor.Tensor[R@tp]
    all_reduce(x, tp, src=P, dst=R)  # E: spmd-collective told src=P, but the input is R@tp


def rebinding(x: Tensor[P@tp]) -> Tensor[R@tp]:
    x = all_reduce(x, tp, src=P, dst=R)
    reveal_type(x)  # N: Tensor[R@tp]
    return x


def boundary(x: Tensor[P@tp]) -> Tensor[R@tp]:
    y = all_reduce(x, tp, src=P, dst=I)
    return y  # E: return-value got "Tensor[I@tp]", expected "Tensor[R@tp]"


def non_static_arguments(x: Tensor[P@tp], axis: type[tp], dst: type[R]) -> None:
    reveal_type(all_reduce(x, axis, src=P, dst=R))  # N: Tensor[Any]
