# mypy: allow-redefinition=False
"""With redefinition off (the plugin turns it on by default), rebinding to a new SPMD type is an error."""
from spmd_stubs import P, R, Tensor, all_reduce
from spmd_stubs.axes import tp


def rebind(p: Tensor[P@tp]) -> None:
    p = all_reduce(p, tp, src=P, dst=R)  # E: assignment
    q = all_reduce(p, tp, src=P, dst=R)
