"""Several axes sharding one dim, major first: S(0)@(dp, tp), canonical S[0, dp, tp]."""
import spmd_stubs as spmd
from spmd_stubs import R, S, Tensor
from spmd_stubs.axes import cp, dp, tp

Grouped = Tensor[S[0, dp, tp], R[cp]]


def headline(x: Tensor[S(0)@(dp, tp), R@cp], y: Tensor[S(0)@(tp, dp)], z: Tensor[S(-1)@(tp,)]) -> None:
    reveal_type(x)  # N: Tensor[R@cp, S(0)@(dp,tp)]
    reveal_type(y)  # N: Tensor[S(0)@(tp,dp)]
    reveal_type(z)  # N: Tensor[S(-1)@tp]


def canonical(x: Grouped) -> None:
    reveal_type(x)  # N: Tensor[R@cp, S(0)@(dp,tp)]


def decays_to_local(x: Tensor[S(0)@(dp, tp)]) -> Tensor[S(0)@dp, S(0)@tp]:
    return x  # local SPMD: a shard is V, whatever its order


def asserted(x: Tensor[R@cp]) -> None:
    y = spmd.assert_type(x, S(1)@(dp, tp))
    reveal_type(y)  # N: Tensor[R@cp, S(1)@(dp,tp)]


def only_shards_group(x: Tensor[R@(dp, tp)]) -> None:  # E: spmd-annotation
    pass
