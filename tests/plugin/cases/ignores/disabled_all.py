# mypy: disable-error-code="spmd"
"""Disabling the parent code silences every spmd rule (mypy's own checks stay)."""
from spmd_stubs import P, R, Tensor, all_reduce
from spmd_stubs.axes import tp


def silent(p: Tensor[P@tp], q: Tensor[P@tp], r: Tensor[R@tp]) -> Tensor[P@tp]:
    p * q
    p + r
    r.backward()
    all_reduce(r, tp, src=P, dst=R)
    return r  # E: return-value
