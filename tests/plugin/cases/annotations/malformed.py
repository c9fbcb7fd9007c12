"""Malformed annotations: spmd-annotation with the fix, and the type is unknown."""
from spmd_stubs import I, MeshAxis, P, R, S, Tensor, V
from spmd_stubs.axes import dp, tp


class edp(MeshAxis): ...


class NotAnAxis: ...


def letter(x: Tensor[Q@tp]) -> None: ...  # E: spmd-annotation unknown SPMD type 'Q'
def axis(x: Tensor[R@zz]) -> None: ...  # E: spmd-annotation 'zz' is not a mesh axis
def not_axis(x: Tensor[R@NotAnAxis]) -> None: ...  # E: spmd-annotation 'NotAnAxis' is not a mesh axis
def twice(x: Tensor[R@tp, V@tp]) -> None: ...  # E: spmd-annotation axis tp is given twice
def shard_without_dim(x: Tensor[S@tp]) -> None: ...  # E: spmd-annotation S needs the sharded tensor dim
def shard_non_int(x: Tensor[S("a")@tp]) -> None: ...  # E: spmd-annotation S takes an int tensor dim
def shard_float(x: Tensor[S(1.5)@tp]) -> None: ...  # E: spmd-annotation S takes an int tensor dim
def no_axis(x: Tensor[R]) -> None: ...  # E: spmd-annotation expected R[axis]
def canonical_twice(x: Tensor[R[tp], I[tp]]) -> None: ...  # E: spmd-annotation axis tp is given twice
def canonical_no_dim(x: Tensor[S[tp]]) -> None: ...  # E: spmd-annotation S needs the sharded tensor dim
def canonical_bad_dim(x: Tensor[S[dp, tp]]) -> None: ...  # E: spmd-annotation S takes an int tensor dim
def canonical_letter(x: Tensor[P[NotAnAxis]]) -> None: ...  # E: spmd-annotation 'NotAnAxis' is not a mesh axis


def custom_axis(x: Tensor[V@edp, R@tp]) -> None:
    reveal_type(x)  # N: Tensor[V@edp, R@tp]


def unknown_after_error(x: Tensor[R@tp, V@tp]) -> None:  # E: spmd-annotation
    reveal_type(x)  # N: Tensor[Any]
