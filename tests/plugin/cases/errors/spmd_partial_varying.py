"""spmd-partial-varying: P combined with V (added to it or multiplied by it)."""
from spmd_stubs import P, S, Tensor, V, reduce_scatter
from spmd_stubs.axes import tp


def wrong(partial: Tensor[P@tp], residual: Tensor[S(0)@tp]) -> None:
    y = residual + partial  # E: spmd-partial-varying adds a Partial to a Varying operand on axis tp


def fixed(partial: Tensor[P@tp], residual: Tensor[S(0)@tp]) -> None:
    y = residual + reduce_scatter(partial, tp, src=P, dst=S(0))
    reveal_type(y)  # N: Tensor[V@tp]
