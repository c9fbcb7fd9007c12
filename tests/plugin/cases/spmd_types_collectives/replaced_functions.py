"""spmd_types' ``@api_boundary`` functions: any function may replace one, as for plain mypy (which types them
``Any``); a call by name still sees its own parameters and its SPMD type."""
import spmd_types as spmd
import torch

from spmd_stubs import P, R, Tensor
from spmd_stubs.axes import tp

original_redistribute = spmd.redistribute


def routed_redistribute(x, group, *, src, dst, **kwargs):
    """Its own parameter names (``group``, not ``axis``) and no ``op_dtype``: a replacement all the same."""
    if src == spmd.P and dst in (spmd.R, spmd.I) and not torch.is_grad_enabled():
        return x
    return original_redistribute(x, group, src=src, dst=dst, **kwargs)


spmd.redistribute = routed_redistribute


def called_by_name(partial: Tensor[P@tp]) -> None:
    reveal_type(spmd.redistribute(partial, "tp", src=spmd.P, dst=spmd.R))  # N: Tensor[R@tp]
    reveal_type(spmd.redistribute(partial, axis="tp", src=spmd.P, dst=spmd.R))  # N: Tensor[R@tp]


def misspelled_option(partial: Tensor[P@tp]) -> Tensor[R@tp]:
    return spmd.redistribute(partial, "tp", src=spmd.P, dst=spmd.R, out_dtyp=torch.float32)  # E: call-arg Unexpected keyword argument "out_dtyp"


def spelled_option(partial: Tensor[P@tp]) -> Tensor[R@tp]:
    return spmd.redistribute(partial, "tp", src=spmd.P, dst=spmd.R, out_dtype=torch.float32)
