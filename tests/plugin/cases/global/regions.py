"""Modes per axis: @global_spmd(tp), @local_map nested inside, undecorated nested defs inherit."""
import torch
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import P, R, S, Tensor, V
from spmd_stubs.axes import dp, ep, tp


def module_level_is_local(h: Tensor[S(-1)@tp], w: Tensor[S(1)@tp]) -> None:
    reveal_type(F.linear(h, w))  # N: Tensor[V@tp]


@spmd.global_spmd(tp)
def global_on_tp_local_on_dp(x: Tensor[S(0)@tp, V@dp], y: Tensor[S(1)@tp, S(1)@dp]) -> None:
    # tp is checked globally, dp locally: V@dp is fine, and S(1)@dp is just V there.
    reveal_type(x * 2.0)  # N: Tensor[V@dp, S(0)@tp]
    x + y  # E: spmd-shard-mismatch on global axis tp


@spmd.global_spmd(tp)
def nested(h: Tensor[S(-1)@tp], w: Tensor[S(1)@tp]) -> Tensor[P@tp]:
    def inherits(a: Tensor[S(-1)@tp], b: Tensor[S(1)@tp]) -> None:
        F.linear(a, b)  # E: spmd-sharded-contraction

    @spmd.local_map(tp)
    def per_rank(a: Tensor[V@tp], b: Tensor[V@tp]) -> Tensor[P@tp]:
        y = F.linear(a, b)  # local SPMD inside: a per-rank matmul
        reveal_type(y)  # N: Tensor[V@tp]
        return spmd.reinterpret(y, tp, src=V, dst=P)

    return per_rank(h, w)


@spmd.global_spmd(tp, ep)
def two_axes(x: Tensor[S(0)@ep, S(-1)@tp], w: Tensor[S(1)@tp, R@ep]) -> None:
    reveal_type(spmd.linear(x, w, out_partial_axes=tp))  # N: Tensor[S(0)@ep, P@tp]

    @spmd.local_map(ep)
    def experts(z: Tensor[V@ep, S(-1)@tp], v: Tensor[V@ep]) -> None:
        reveal_type(z * v)  # N: Tensor[V@ep, S(-1)@tp]
        z.sum(-1)  # E: spmd-sharded-contraction global axis tp
        v.sum()  # ep is local here: fine

    @spmd.local_map((tp, ep))
    def all_local(z: Tensor[S(0)@ep, S(-1)@tp]) -> None:
        reveal_type(z.sum())  # N: Tensor[V@ep, V@tp]


@spmd.global_spmd((dp, tp))
def tuple_of_axes(x: Tensor[S(0)@dp, S(-1)@tp], v: Tensor[V@dp]) -> None:
    reveal_type(x.sum(0, keepdim=True) if False else x * 1.0)  # N: Tensor[S(0)@dp, S(-1)@tp]
    v * 1.0  # E: spmd-shard-mismatch global axis dp


class Block:
    @spmd.global_spmd(tp)
    def forward(self, h: Tensor[S(-1)@tp], w: Tensor[S(1)@tp]) -> Tensor[P@tp]:
        F.linear(h, w)  # E: spmd-sharded-contraction
        return spmd.linear(h, w, out_partial_axes=tp)

    def local_method(self, h: Tensor[S(-1)@tp], w: Tensor[S(1)@tp]) -> None:
        reveal_type(F.linear(h, w))  # N: Tensor[V@tp]
