"""Megatron's (and fairscale's, picotron's) tensor-parallel mappings as SPMD-typed autograd Functions."""
from typing import Any

import torch

from spmd_stubs import I, P, R, S, Tensor, V, all_gather, all_reduce, convert, reinterpret
from spmd_stubs.axes import dp, tp


class _CopyToModelParallelRegion(torch.autograd.Function):
    """Identity forward, all-reduce backward."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor[I@tp]) -> Tensor[R@tp]:
        return convert(input_, tp, src=I, dst=R)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[P@tp]) -> Tensor[I@tp]:
        return all_reduce(grad_output, tp, src=P, dst=I)


class _ReduceFromModelParallelRegion(torch.autograd.Function):
    """All-reduce forward, identity backward: the gradient of a P input is R (reinterpret(I, R) moves no data)."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor[P@tp]) -> Tensor[I@tp]:
        return all_reduce(input_, tp, src=P, dst=I)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[I@tp]) -> Tensor[R@tp]:
        return reinterpret(grad_output, tp, src=I, dst=R)


class _ScatterToModelParallelRegion(torch.autograd.Function):
    """Split the last dim forward, all-gather backward."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor[I@tp]) -> Tensor[S(-1)@tp]:
        return convert(input_, tp, src=I, dst=S(-1))

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[S(-1)@tp]) -> Tensor[I@tp]:
        return all_gather(grad_output, tp, src=S(-1), dst=I)


class _GatherFromModelParallelRegion(torch.autograd.Function):
    """All-gather the last dim forward, split backward."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor[S(-1)@tp]) -> Tensor[I@tp]:
        return all_gather(input_, tp, src=S(-1), dst=I)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[I@tp]) -> Tensor[S(-1)@tp]:
        return convert(grad_output, tp, src=I, dst=S(-1))


def tensor_parallel_mlp(x: Tensor[I@tp], p: Tensor[P@tp], h: Tensor[S(-1)@tp]) -> None:
    reveal_type(_CopyToModelParallelRegion.apply(x))  # N: Tensor[R@tp]
    reveal_type(_ReduceFromModelParallelRegion.apply(p))  # N: Tensor[I@tp]
    reveal_type(_ScatterToModelParallelRegion.apply(x))  # N: Tensor[S(-1)@tp]
    reveal_type(_GatherFromModelParallelRegion.apply(h))  # N: Tensor[I@tp]


def extra_axes_pass_through(x: Tensor[I@tp, V@dp], p: Tensor[P@tp, V@dp]) -> None:
    reveal_type(_CopyToModelParallelRegion.apply(x))  # N: Tensor[V@dp, R@tp]
    reveal_type(_ReduceFromModelParallelRegion.apply(p))  # N: Tensor[V@dp, I@tp]


def as_a_function(x: Tensor[I@tp, V@dp]) -> None:
    copy_to_tensor_model_parallel_region = _CopyToModelParallelRegion.apply
    reveal_type(copy_to_tensor_model_parallel_region(x))  # N: Tensor[V@dp, R@tp]


def wrong_argument(p: Tensor[P@tp], r: Tensor[R@tp], i: Tensor[I@tp]) -> None:
    _CopyToModelParallelRegion.apply(p)  # E: arg-type "Tensor[P@tp]"; expected "Tensor[I@tp]"
    _ReduceFromModelParallelRegion.apply(r)  # E: arg-type "Tensor[R@tp]"; expected "Tensor[P@tp]"
    _CopyToModelParallelRegion.apply(i, 1)  # E: call-arg Too many arguments for "apply" of "_CopyToModelParallelRegion"
