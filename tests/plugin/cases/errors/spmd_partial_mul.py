"""spmd-partial-mul: P in two or more factors of a multilinear op (mul, matmul, einsum)."""
from spmd_stubs import P, R, Tensor, all_reduce
from spmd_stubs.axes import tp


def wrong(a: Tensor[P@tp], b: Tensor[P@tp]) -> None:
    c = a * b  # E: spmd-partial-mul multiplies 2 Partial factors on axis tp (P@tp * P@tp)


def fixed(a: Tensor[P@tp], b: Tensor[P@tp]) -> None:
    c = all_reduce(a, tp, src=P, dst=R) * b
    reveal_type(c)  # N: Tensor[P@tp]
