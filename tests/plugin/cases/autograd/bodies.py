"""Raw collectives in a Function's forward/backward are its implementation: unreported, the buffer retyped."""
from typing import Any

import torch
import torch.distributed as dist

from spmd_stubs import I, P, R, S, Tensor, V, convert, group_of
from spmd_stubs.axes import dp, tp


class _CopyToModelParallelRegion(torch.autograd.Function):
    """Identity forward, raw all-reduce backward: the P gradient is I afterwards, as backward declares."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor[I@tp]) -> Tensor[R@tp]:
        return convert(input_, tp, src=I, dst=R)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[P@tp]) -> Tensor[I@tp]:
        dist.all_reduce(grad_output, group=group_of(tp))
        reveal_type(grad_output)  # N: Tensor[I@tp]
        return grad_output


class _ReduceFromModelParallelRegion(torch.autograd.Function):
    """Raw all-reduce forward: the P input is R afterwards (R is the default, the declared result is R)."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor[P@tp, V@dp]) -> Tensor[R@tp, V@dp]:
        dist.all_reduce(input_, group=group_of(tp))
        reveal_type(input_)  # N: Tensor[V@dp, R@tp]
        return input_

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[P@tp, V@dp]) -> Tensor[R@tp, V@dp]:
        dist.all_reduce(grad_output, group=group_of(tp))
        return grad_output


class ForgotTheAllReduce(torch.autograd.Function):
    """The copy's backward without its all-reduce: mypy's return check finds the P gradient."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor[I@tp]) -> Tensor[R@tp]:
        return convert(input_, tp, src=I, dst=R)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[P@tp]) -> Tensor[I@tp]:
        return grad_output  # E: return-value got "Tensor[P@tp]", expected "Tensor[I@tp]"


class AllReduceOnAnotherAxis(torch.autograd.Function):
    """A dp all-reduce leaves tp's type as it was."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor[P@tp, P@dp]) -> Tensor[R@tp, R@dp]:
        dist.all_reduce(input_, group=group_of(dp))
        reveal_type(input_)  # N: Tensor[R@dp, P@tp]
        return input_  # E: return-value got "Tensor[R@dp, P@tp]", expected "Tensor[R@dp, R@tp]"

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[P@tp, P@dp]) -> Tensor[R@tp, R@dp]:
        dist.all_reduce(grad_output, group=group_of(tp))
        dist.all_reduce(grad_output, group=group_of(dp))
        return grad_output


class OnlyInOneBranch(torch.autograd.Function):
    """An all-reduce in one branch only: after the branches the tensor is P again, as mypy joins them."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor[P@tp], reduce: bool) -> Tensor[R@tp]:
        if reduce:
            dist.all_reduce(input_, group=group_of(tp))
            reveal_type(input_)  # N: Tensor[R@tp]
        return input_  # E: return-value got "Tensor[P@tp]", expected "Tensor[R@tp]"

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[P@tp]) -> tuple[Tensor[R@tp], None]:
        dist.all_reduce(grad_output, group=group_of(tp))
        return grad_output, None


class _GatherFromSequenceParallelRegion(torch.autograd.Function):
    """An all-gather's output buffer is R afterwards, here I as the declared result is."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor[S(0)@tp]) -> Tensor[I@tp]:
        output = torch.empty(4)
        dist.all_gather_into_tensor(output, input_, group=group_of(tp))
        reveal_type(output)  # N: Tensor[I@tp]
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[I@tp]) -> Tensor[S(0)@tp]:
        return convert(grad_output, tp, src=I, dst=S(0))


class _ReduceScatterToSequenceParallelRegion(torch.autograd.Function):
    """A reduce-scatter's output buffer is S(0) afterwards; the gradient's all-gather (the older name) R."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor[P@tp]) -> Tensor[S(0)@tp]:
        output = torch.empty(4)
        dist.reduce_scatter_tensor(output, input_, group=group_of(tp))
        reveal_type(output)  # N: Tensor[S(0)@tp]
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[S(0)@tp]) -> Tensor[R@tp]:
        output = torch.empty(4)
        dist._all_gather_base(output, grad_output, group=group_of(tp))
        reveal_type(output)  # N: Tensor[R@tp]
        return output


class UnknownGroup(torch.autograd.Function):
    """A group naming no axis: nothing reported, no type changed."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor[P@tp], group: Any) -> Tensor[P@tp]:
        dist.all_reduce(input_, group=group)
        reveal_type(input_)  # N: Tensor[P@tp]
        return input_

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[R@tp]) -> tuple[Tensor[R@tp], None]:
        return grad_output, None


def outside_a_function(x: Tensor[P@tp]) -> Tensor[R@tp]:
    dist.all_reduce(x, group=group_of(tp))  # E: spmd-untyped-collective torch.distributed all_reduce on Tensor[P@tp]
    return x  # E: return-value got "Tensor[P@tp]", expected "Tensor[R@tp]"


def the_type_stays_in_its_function(x: Tensor[P@tp]) -> None:
    reveal_type(x)  # N: Tensor[P@tp]
