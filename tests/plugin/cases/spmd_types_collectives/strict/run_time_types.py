"""Strict mode names a registered Function whose typecheck_forward is not read as its signature."""
from typing import Any

import spmd_types as spmd
import torch


@spmd.register_autograd_function
class ScaleBiasForward(torch.autograd.Function):  # E: spmd-untyped-boundary `ScaleBiasForward.typecheck_forward` is not read as the Function's signature
    """models/gpt_oss/moe.py's: the types depend on a run-time value (whether ep has several ranks)."""

    @staticmethod
    def forward(ctx: Any, bias: torch.Tensor, tp_degree: int) -> torch.Tensor:
        return bias / tp_degree if tp_degree > 1 else bias

    @staticmethod
    def typecheck_forward(bias: torch.Tensor, tp_degree: int) -> torch.Tensor:
        if tp_degree > 1:
            in_type = out_type = spmd.V
        else:
            in_type, out_type = {"tp": spmd.R}, {"tp": spmd.V}
        spmd.assert_type(bias, in_type)
        out = ScaleBiasForward.apply(bias, tp_degree)
        spmd.assert_type(out, out_type)
        return out

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad_output, None


@spmd.register_autograd_function
class ScaleBiasForwardFixed(torch.autograd.Function):
    """The same Function with its types stated for one configuration (tp only)."""

    @staticmethod
    def forward(ctx: Any, bias: torch.Tensor, tp_degree: int) -> torch.Tensor:
        return bias / tp_degree if tp_degree > 1 else bias

    @staticmethod
    def typecheck_forward(bias: torch.Tensor, tp_degree: int) -> torch.Tensor:
        spmd.assert_type(bias, {"tp": spmd.R})
        out = ScaleBiasForwardFixed.apply(bias, tp_degree)
        spmd.assert_type(out, {"tp": spmd.V})
        return out

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad_output, None
