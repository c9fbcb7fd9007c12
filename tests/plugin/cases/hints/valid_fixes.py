"""Every fix a message names is a valid call that gives a correct program; where the right fix depends
on what the value means, the message says both."""
import torch.distributed as dist
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import I, P, R, Tensor, V
from spmd_stubs.axes import tp


def wrong_src(i: Tensor[I@tp], r: Tensor[R@tp]) -> None:
    spmd.all_reduce(i, tp, src=P, dst=R)  # E: spmd-collective Fix: convert(x, tp, src=I, dst=R) takes the I@tp input to R@tp
    spmd.all_reduce(r, tp, src=P, dst=R)  # E: spmd-collective Fix: drop the all_reduce: the input already is R@tp


def raw_collectives(r: Tensor[R@tp], p: Tensor[P@tp], out: Tensor[V@tp]) -> None:
    dist.all_reduce(r)  # E: spmd-untyped-collective x is R@tp: the same on every rank of tp
    dist.reduce_scatter_tensor(out, p)  # E: spmd-untyped-collective spmd_stubs.reduce_scatter(x, tp, src=P, dst=V)


def asserted_partial(v: Tensor[V@tp]) -> None:
    spmd.assert_type(v, P@tp)  # E: spmd-assert reinterpret(x, tp, src=V, dst=P) first if each rank's values are its part


def label_smoothing(log_probs: Tensor[V@tp], target_logit: Tensor[I@tp]) -> None:
    smooth = log_probs.mean(-1)  # a mean over this rank's vocab shard only
    target_logit - smooth  # E: spmd-invariant-mix all_reduce(y, tp, src=P, dst=I) on it first


def row_parallel_bias(x: Tensor[V@tp], w: Tensor[V@tp], b: Tensor[I@tp], b0: Tensor[P@tp]) -> None:
    F.linear(x, w, b)  # E: spmd-invariant-mix leave the bias out of linear, reduce the product
    F.linear(x, w, b0)  # E: spmd-partial-varying reinterpret(y, tp, src=V, dst=P) on the product and add the bias to it


def the_fixes_applied(x: Tensor[V@tp], w: Tensor[V@tp], b: Tensor[I@tp], b0: Tensor[P@tp], i: Tensor[I@tp]) -> None:
    y = spmd.all_reduce(spmd.reinterpret(F.linear(x, w), tp, src=V, dst=P), tp, src=P, dst=I) + b
    reveal_type(y)  # N: Tensor[I@tp]
    z = spmd.all_reduce(spmd.reinterpret(F.linear(x, w), tp, src=V, dst=P) + b0, tp, src=P, dst=R)
    reveal_type(z)  # N: Tensor[R@tp]
    reveal_type(spmd.convert(i, tp, src=I, dst=R))  # N: Tensor[R@tp]
