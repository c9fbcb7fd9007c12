"""Collectives in global SPMD: only the shard forms propagate; convert is the identity."""
import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import dp, tp


@spmd.global_spmd(tp)
def shard_forms(x: Tensor[S(0)@tp], p: Tensor[P@tp], r: Tensor[R@tp], i: Tensor[I@tp]) -> None:
    reveal_type(spmd.all_gather(x, tp, src=S(0), dst=R))  # N: Tensor[R@tp]
    reveal_type(spmd.all_to_all(x, tp, src=S(0), dst=S(1)))  # N: Tensor[S(1)@tp]
    reveal_type(spmd.reduce_scatter(p, tp, src=P, dst=S(0)))  # N: Tensor[S(0)@tp]
    reveal_type(spmd.all_reduce(p, tp, src=P, dst=R))  # N: Tensor[R@tp]
    reveal_type(spmd.convert(r, tp, src=R, dst=S(-1)))  # N: Tensor[S(-1)@tp]
    reveal_type(spmd.convert(i, tp, src=I, dst=S(0)))  # N: Tensor[S(0)@tp]


@spmd.global_spmd(tp)
def varying_forms(x: Tensor[S(0)@tp], p: Tensor[P@tp], r: Tensor[R@tp], v: Tensor[V@tp]) -> None:
    spmd.all_gather(x, tp, src=V, dst=R)  # E: spmd-shard-mismatch use the shard form (src=S(i)
    spmd.reduce_scatter(p, tp, src=P, dst=V)  # E: spmd-shard-mismatch local_map(tp)
    spmd.convert(r, tp, src=R, dst=V)  # E: spmd-shard-mismatch dst=V
    spmd.all_gather(v, tp, src=S(0), dst=R)  # E: spmd-shard-mismatch gets a V@tp input
    spmd.all_gather(x, tp, src=S(1), dst=R)  # E: spmd-shard-mismatch pass src=S(0)


@spmd.global_spmd(dp, tp)
def groups(x: Tensor[S(0)@(dp, tp)], p: Tensor[S(0)@dp, P@tp]) -> None:
    reveal_type(spmd.all_gather(x, tp, src=S(0), dst=R))  # N: Tensor[S(0)@dp, R@tp]
    spmd.all_gather(x, dp, src=S(0), dst=R)  # E: spmd-shard-mismatch not the last (minor) axis
    reveal_type(spmd.reduce_scatter(p, tp, src=P, dst=S(0)))  # N: Tensor[S(0)@(dp,tp)]


def local_mode(v: Tensor[V@tp]) -> None:
    reveal_type(spmd.all_gather(v, tp, src=V, dst=R))  # N: Tensor[R@tp]
