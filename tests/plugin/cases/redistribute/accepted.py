"""redistribute(x, src_spec, dst_spec): the result is dst on the axes the specs name, the rest passes through."""
import torch

import spmd_stubs as spmd
from spmd_stubs import I, P, Pmax, R, S, Tensor, V
from spmd_stubs.axes import cp, dp, ep, tp
from spmd_stubs.collectives import redistribute


def flattened(x: Tensor[P@dp, P@tp], y: Tensor[S(0)@(dp, tp), R@cp]) -> None:
    reveal_type(spmd.redistribute(x, (P@dp, P@tp), (R@dp, R@tp)))  # N: Tensor[R@dp, R@tp]
    reveal_type(spmd.redistribute(x, (P@dp, P@tp), (S(0)@(dp, tp),)))  # N: Tensor[S(0)@(dp,tp)]
    reveal_type(redistribute(y, (S(0)@(dp, tp),), (I@dp, I@tp)))  # N: Tensor[R@cp, I@dp, I@tp]


def reorder(x: Tensor[S(0)@(dp, tp)]) -> Tensor[S(0)@(tp, dp)]:
    y = spmd.redistribute(x, (S(0)@(dp, tp),), (S(0)@(tp, dp),))
    reveal_type(y)  # N: Tensor[S(0)@(tp,dp)]
    return y


def other_axes_pass_through(x: Tensor[S(0)@tp, V@ep, P@cp]) -> None:
    reveal_type(spmd.redistribute(x, (S(0)@tp,), (S(1)@tp,)))  # N: Tensor[P@cp, V@ep, S(1)@tp]


def mixed_kinds(x: Tensor[S(0)@dp, P@tp]) -> None:
    reveal_type(spmd.redistribute(x, (S(0)@dp, P@tp), (S(0)@(tp, dp),)))  # N: Tensor[S(0)@(tp,dp)]
    reveal_type(spmd.redistribute(x, [S(0)@dp, P@tp], [R@dp, S(1)@tp]))  # N: Tensor[R@dp, S(1)@tp]


def refines_an_unknown_or_varying_input(t: torch.Tensor, v: Tensor[V@dp, V@tp], u: Tensor[S(0)@dp, S(0)@tp]) -> None:
    reveal_type(spmd.redistribute(t, (S(0)@(dp, tp),), (R@dp, R@tp)))  # N: Tensor[R@dp, R@tp]
    reveal_type(spmd.redistribute(v, (S(0)@(dp, tp),), (R@dp, R@tp)))  # N: Tensor[R@dp, R@tp]
    # Written one by one, the order of dp and tp is not known: the spec says it.
    reveal_type(spmd.redistribute(u, (S(0)@(dp, tp),), (S(1)@(dp, tp),)))  # N: Tensor[S(1)@(dp,tp)]


def pending_max(x: Tensor[Pmax@dp, Pmax@tp]) -> None:
    reveal_type(spmd.redistribute(x, (Pmax@dp, Pmax@tp), (R@dp, R@tp)))  # N: Tensor[R@dp, R@tp]


def nothing_to_do(x: Tensor[S(0)@(dp, tp)]) -> None:
    reveal_type(spmd.redistribute(x, (S(0)@(dp, tp),), (S(0)@(dp, tp),)))  # N: Tensor[S(0)@(dp,tp)]


def per_axis_form_unchanged(x: Tensor[P@tp, S(0)@dp], y: Tensor[S(0)@(dp, tp)]) -> None:
    reveal_type(spmd.redistribute(x, tp, src=P, dst=R))  # N: Tensor[S(0)@dp, R@tp]
    reveal_type(spmd.redistribute(y, (dp, tp), src=S(0), dst=R))  # N: Tensor[R@dp, R@tp]


def spec_in_a_variable(x: Tensor[P@tp]) -> None:
    src = (P@tp,)
    reveal_type(spmd.redistribute(x, src, (R@tp,)))  # N: Tensor[Any]


@spmd.global_spmd(dp, tp)
def global_boundary(x: Tensor[S(0)@(dp, tp)]) -> Tensor[S(0)@(tp, dp)]:
    return spmd.redistribute(x, (S(0)@(dp, tp),), (S(0)@(tp, dp),))
