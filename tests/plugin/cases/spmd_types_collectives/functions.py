"""register_autograd_function with typecheck_forward: its assert_type calls are the Function's signature.

Shaped as torchtitan's distributed/linear.py and components/loss.py: the group is a parameter (an axis
variable, bound at each apply to the axis the caller's group names), the other axes of the result are
the input's (`{**spmd.get_local_type(x), group: ...}`).
"""
from typing import Any

import spmd_types as spmd
import torch
import torch.distributed as dist

from spmd_stubs import Group, R, S, Tensor, V
from spmd_stubs.axes import dp, tp


@spmd.register_autograd_function
class AllGatherLinear(torch.autograd.Function):
    @staticmethod
    def typecheck_forward(x_shard_m: torch.Tensor, w_shard_n: torch.Tensor, bias_shard_n: torch.Tensor | None,
                          group: dist.ProcessGroup) -> torch.Tensor:
        spmd.assert_type(x_shard_m, {group: spmd.S(0)})
        spmd.assert_type(w_shard_n, {group: spmd.S(0)})
        if bias_shard_n is not None:
            spmd.assert_type(bias_shard_n, {group: spmd.S(0)})
        result = AllGatherLinear.apply(x_shard_m, w_shard_n, bias_shard_n, group)
        output_type: dict[Any, Any] = {**spmd.get_local_type(x_shard_m), group: spmd.S(1)}
        spmd.assert_type(result, output_type)
        return result

    @staticmethod
    def forward(ctx: Any, x_shard_m: torch.Tensor, w_shard_n: torch.Tensor, bias_shard_n: torch.Tensor | None,
                group: dist.ProcessGroup) -> torch.Tensor:
        reveal_type(x_shard_m)  # N: Tensor[S(0)@group]
        x_full = spmd.all_gather(x_shard_m, group, src=spmd.S(0), dst=spmd.R)
        reveal_type(x_full)  # N: Tensor[R@group]
        ctx.save_for_backward(x_full, w_shard_n)
        return x_full @ w_shard_n.T

    @staticmethod
    def backward(ctx: Any, grad_y_shard_n: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None, None]:
        reveal_type(grad_y_shard_n)  # N: Tensor[S(1)@group]
        x_full, w_shard_n = ctx.saved_tensors
        return grad_y_shard_n @ w_shard_n, grad_y_shard_n.T @ x_full, None, None


def column_parallel(x: Tensor[S(0)@tp, V@dp], w: Tensor[S(0)@tp], tp_group: Group[tp]) -> None:
    reveal_type(AllGatherLinear.apply(x, w, None, tp_group))  # N: Tensor[V@dp, S(1)@tp]


def group_of_unknown_axis(x: Tensor[S(0)@tp], w: Tensor[S(0)@tp], group: dist.ProcessGroup) -> None:
    reveal_type(AllGatherLinear.apply(x, w, None, group))  # N: Tensor[Any]


@spmd.register_autograd_function
class AllGatherReplicatedLinear(torch.autograd.Function):
    """AllGatherLinear's shape with a replicated weight (a router): the gather is what makes the result R."""

    @staticmethod
    def typecheck_forward(x_shard_m: torch.Tensor, w: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        spmd.assert_type(x_shard_m, {group: spmd.S(0)})
        spmd.assert_type(w, {group: spmd.R})
        result = AllGatherReplicatedLinear.apply(x_shard_m, w, group)
        spmd.assert_type(result, {**spmd.get_local_type(x_shard_m), group: spmd.R})
        return result

    @staticmethod
    def forward(ctx: Any, x_shard_m: torch.Tensor, w: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        ctx.save_for_backward(x_shard_m, w)
        ctx.group = group
        return x_shard_m @ w.T  # E: return-value got "Tensor[V@group]", expected "Tensor[R@group]"

    @staticmethod
    def backward(ctx: Any, grad_y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        x_shard_m, w = ctx.saved_tensors
        grad_x = spmd.reduce_scatter(grad_y @ w, ctx.group, src=spmd.P, dst=spmd.S(0))
        return grad_x, grad_y.T @ x_shard_m, None


@spmd.register_autograd_function
class AllGatherReplicatedLinearFixed(torch.autograd.Function):
    @staticmethod
    def typecheck_forward(x_shard_m: torch.Tensor, w: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        spmd.assert_type(x_shard_m, {group: spmd.S(0)})
        spmd.assert_type(w, {group: spmd.R})
        result = AllGatherReplicatedLinearFixed.apply(x_shard_m, w, group)
        spmd.assert_type(result, {**spmd.get_local_type(x_shard_m), group: spmd.R})
        return result

    @staticmethod
    def forward(ctx: Any, x_shard_m: torch.Tensor, w: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        x_full = spmd.all_gather(x_shard_m, group, src=spmd.S(0), dst=spmd.R)
        ctx.save_for_backward(x_full, w)
        ctx.group = group
        return x_full @ w.T

    @staticmethod
    def backward(ctx: Any, grad_y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        reveal_type(grad_y)  # N: Tensor[P@group]
        x_full, w = ctx.saved_tensors
        grad_x = spmd.reduce_scatter(grad_y @ w, ctx.group, src=spmd.P, dst=spmd.S(0))
        reveal_type(grad_x)  # N: Tensor[S(0)@group]
        return grad_x, grad_y.T @ x_full, None


@spmd.register_autograd_function
class ScaleBiasForward(torch.autograd.Function):
    """models/gpt_oss/moe.py's: the types depend on a run-time value, so the Function stays as declared."""

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


def scale_bias(bias: Tensor[R@tp]) -> None:
    reveal_type(ScaleBiasForward.apply(bias, 2))  # N: Any
