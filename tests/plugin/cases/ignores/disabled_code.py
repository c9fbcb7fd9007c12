# mypy: disable-error-code="spmd-partial-mul"
"""Disabling one code leaves the others on."""
from spmd_stubs import P, R, Tensor
from spmd_stubs.axes import tp


def partly(p: Tensor[P@tp], q: Tensor[P@tp], r: Tensor[R@tp]) -> None:
    p * q
    p + r  # E: spmd-partial-affine
