"""spmd-annotation: a malformed SPMD annotation (unknown letter or axis, axis twice, bad shard dim)."""
from spmd_stubs import R, S, Tensor, V
from spmd_stubs.axes import dp, tp


def wrong(x: Tensor[R@tp, V@tp], y: Tensor[S@dp]) -> None: ...  # E: spmd-annotation axis tp is given twice # E: spmd-annotation S needs the sharded tensor dim


def fixed(x: Tensor[R@tp, V@dp], y: Tensor[S(0)@dp]) -> None:
    reveal_type(y)  # N: Tensor[S(0)@dp]
