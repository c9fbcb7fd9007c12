# mypy: warn-unused-ignores
"""type: ignore with an spmd code silences exactly that code; the parent code silences all."""
from spmd_stubs import P, R, Tensor
from spmd_stubs.axes import tp


def silenced(p: Tensor[P@tp], q: Tensor[P@tp], r: Tensor[R@tp]) -> None:
    p * q  # type: ignore[spmd-partial-mul]
    p + r  # type: ignore[spmd]  # E: unused-ignore use narrower [spmd-partial-affine]
    p * q  # type: ignore[spmd-partial-affine]  # E: spmd-partial-mul # E: unused-ignore
    r + r  # type: ignore[spmd]  # E: unused-ignore
