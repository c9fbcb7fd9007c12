"""nanotron's and picotron's differentiable collectives, a Function with a non-tensor argument and two outputs."""
from typing import Any, Optional

import torch
import torch.distributed as dist

from spmd_stubs import I, P, R, S, Tensor, V, all_gather, all_reduce, convert, reduce_scatter
from spmd_stubs.axes import dp, tp


class DifferentiableAllGather(torch.autograd.Function):
    """nanotron: all-gather forward, reduce-scatter backward."""

    @staticmethod
    def forward(ctx: Any, tensor: Tensor[V@tp], group: Optional[dist.ProcessGroup]) -> Tensor[R@tp]:
        return all_gather(tensor, tp, src=V, dst=R, group=group)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[P@tp]) -> tuple[Tensor[V@tp], None]:
        return reduce_scatter(grad_output, tp, src=P, dst=V), None


class DifferentiableReduceScatterSum(torch.autograd.Function):
    """nanotron: reduce-scatter forward, all-gather backward."""

    @staticmethod
    def forward(ctx: Any, tensor: Tensor[P@tp], group: Optional[dist.ProcessGroup]) -> Tensor[S(0)@tp]:
        return reduce_scatter(tensor, tp, src=P, dst=S(0), group=group)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[S(0)@tp]) -> tuple[Tensor[R@tp], None]:
        return all_gather(grad_output, tp, src=S(0), dst=R), None


class Split(torch.autograd.Function):
    """A non-tensor argument and two outputs: a shard and a replicated copy."""

    @staticmethod
    def forward(ctx: Any, x: Tensor[I@tp], dim: int) -> tuple[Tensor[S(0)@tp], Tensor[R@tp]]:
        return convert(x, tp, src=I, dst=S(0)), convert(x, tp, src=I, dst=R)

    @staticmethod
    def backward(ctx: Any, g_shard: Tensor[S(0)@tp], g_copy: Tensor[P@tp]) -> tuple[Optional[Tensor[I@tp]], None]:
        return all_gather(g_shard, tp, src=S(0), dst=I) + all_reduce(g_copy, tp, src=P, dst=I), None


class Untyped(torch.autograd.Function):
    """No SPMD type anywhere: ``apply`` stays torch's (Any)."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class PlainTensors(torch.autograd.Function):
    """Only plain tensors: ``apply`` stays torch's (Any)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g * 2


def use(v: Tensor[V@tp, V@dp], p: Tensor[P@tp], i: Tensor[I@tp, R@dp], group: dist.ProcessGroup) -> None:
    reveal_type(DifferentiableAllGather.apply(v, group))  # N: Tensor[V@dp, R@tp]
    reveal_type(DifferentiableReduceScatterSum.apply(p, None))  # N: Tensor[S(0)@tp]
    reveal_type(Split.apply(i, 0))  # N: tuple[torch._tensor.Tensor[R@dp, S(0)@tp], torch._tensor.Tensor[R@dp, R@tp]]
    Split.apply(i, "0")  # E: arg-type "str"; expected "int"
    DifferentiableAllGather.apply(p, group)  # E: arg-type "Tensor[P@tp]"; expected "Tensor[V@tp]"


def untyped(x: Tensor[P@tp], t: torch.Tensor) -> None:
    reveal_type(Untyped.apply(x, 1, "anything"))  # N: Any
    reveal_type(PlainTensors.apply(t))  # N: Any
