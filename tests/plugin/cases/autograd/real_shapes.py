"""Functions as nanotron, picotron and Megatron write them (raw bodies, `return input_`), annotated: the body rules."""
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from spmd_stubs import I, P, R, S, Tensor, V, assert_type
from spmd_stubs.axes import dp, tp


class ProcessGroupManager:
    tp_group: dist.ProcessGroup
    dp_group: dist.ProcessGroup
    tp_rank: int
    tp_world_size: int


pgm = ProcessGroupManager()


class CopyToModelParallelRegion(torch.autograd.Function):
    """picotron's f: identity forward (I data is R data), raw all-reduce backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor[I@tp]) -> Tensor[R@tp]:
        return x

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[P@tp]) -> Tensor[I@tp]:
        if pgm.tp_world_size == 1:
            return grad_output  # one rank: the pending sum is the value
        dist.all_reduce(grad_output, op=dist.ReduceOp.SUM, group=pgm.tp_group)
        return grad_output


class ReduceFromModelParallelRegion(torch.autograd.Function):
    """picotron's g: raw all-reduce forward, identity backward (the I gradient is R data)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor[P@tp]) -> Tensor[I@tp]:
        dist.all_reduce(x, op=dist.ReduceOp.SUM, group=pgm.tp_group)
        return x

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[I@tp]) -> Tensor[R@tp]:
        return grad_output


class GatherFromModelParallelRegion(torch.autograd.Function):
    """picotron's gather: dist.all_gather into a list, each item the same on every rank; split backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor[S(-1)@tp]) -> Tensor[I@tp]:
        tensor_list = [torch.empty_like(x) for _ in range(pgm.tp_world_size)]
        dist.all_gather(tensor_list, x, group=pgm.tp_group)
        reveal_type(tensor_list)  # N: list[torch._tensor.Tensor[I@tp]]
        return torch.cat(tensor_list, dim=-1).contiguous()

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[I@tp]) -> Tensor[S(-1)@tp]:
        chunks = torch.split(grad_output, grad_output.shape[-1] // pgm.tp_world_size, dim=-1)
        return chunks[pgm.tp_rank].contiguous()


class LinearWithAsyncAllReduce(torch.autograd.Function):
    """picotron's column-parallel linear: I @ V in both bodies (no gradient there), the input's gradient all-reduced."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor[I@tp], weight: Tensor[S(0)@tp], bias: Tensor[S(0)@tp]) -> Tensor[V@tp]:
        ctx.save_for_backward(input_, weight)
        return input_ @ weight.t() + bias

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[V@tp]) -> tuple[Tensor[I@tp], Tensor[S(0)@tp], Tensor[S(0)@tp]]:
        input_ = assert_type(ctx.saved_tensors[0], I@tp)
        weight = assert_type(ctx.saved_tensors[1], S(0)@tp)
        grad_input = grad_output @ weight
        handle = dist.all_reduce(grad_input, group=pgm.tp_group, async_op=True)
        reveal_type(grad_input)  # N: Tensor[I@tp]
        grad_weight = grad_output.t() @ input_
        grad_bias = grad_output.sum(0)
        handle.wait()
        return grad_input, grad_weight, grad_bias


class LinearForgetsTheAllReduce(torch.autograd.Function):
    """The same backward without its all-reduce: each rank's part of the input's gradient is returned as I."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor[I@tp], weight: Tensor[S(0)@tp]) -> Tensor[V@tp]:
        ctx.save_for_backward(weight)
        return input_ @ weight.t()

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[V@tp]) -> tuple[Tensor[I@tp], Tensor[S(0)@tp]]:
        weight = assert_type(ctx.saved_tensors[0], S(0)@tp)
        grad_input = grad_output @ weight
        return grad_input, grad_output  # E: return-value got "tuple[Tensor[V@tp], Tensor[V@tp]]", expected "tuple[Tensor[I@tp], Tensor[S(0)@tp]]"


class DifferentiableAllGather(torch.autograd.Function):
    """nanotron's all-gather: into a buffer; backward reduce-scatters (here in the functional form)."""

    @staticmethod
    def forward(ctx: Any, tensor: Tensor[S(0)@tp]) -> Tensor[R@tp]:
        unsharded = torch.empty(4)
        dist.all_gather_into_tensor(unsharded, tensor.contiguous(), group=pgm.tp_group)
        return unsharded

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[P@tp]) -> Tensor[S(0)@tp]:
        return funcol.reduce_scatter_tensor(grad_output, "sum", 0, pgm.tp_group)


class AllGatherWithoutReduceScatter(torch.autograd.Function):
    """An all-gather whose backward only splits: the P gradient is returned as each rank's shard."""

    @staticmethod
    def forward(ctx: Any, tensor: Tensor[S(0)@tp]) -> Tensor[R@tp]:
        return funcol.all_gather_tensor(tensor, 0, pgm.tp_group)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[P@tp]) -> Tensor[S(0)@tp]:
        return grad_output.chunk(pgm.tp_world_size)[pgm.tp_rank]  # E: return-value got "Tensor[P@tp]", expected "Tensor[S(0)@tp]"


class DifferentiableReduceScatterSum(torch.autograd.Function):
    """nanotron's reduce-scatter: into a buffer, op=SUM."""

    @staticmethod
    def forward(ctx: Any, tensor: Tensor[P@tp]) -> Tensor[S(0)@tp]:
        sharded = torch.empty(4)
        dist.reduce_scatter_tensor(sharded, tensor, group=pgm.tp_group, op=dist.ReduceOp.SUM)
        return sharded

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[S(0)@tp]) -> Tensor[R@tp]:
        return funcol.all_gather_tensor(grad_output, 0, pgm.tp_group)


class AllToAll(torch.autograd.Function):
    """Megatron's expert all-to-all: all_to_all_single into a buffer keeps V, on the group's axis only."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor[V@dp, R@tp]) -> Tensor[V@dp, R@tp]:
        output = torch.empty_like(input_)
        dist.all_to_all_single(output, input_, group=pgm.dp_group)
        reveal_type(output)  # N: Tensor[V@dp, R@tp]
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[V@dp, P@tp]) -> Tensor[V@dp, P@tp]:
        return funcol.all_to_all_single(grad_output, None, None, pgm.dp_group)


class ReduceOnTheWrongGroup(torch.autograd.Function):
    """A raw all-reduce on dp's group where the forward declares tp's reduction: tp stays P."""

    @staticmethod
    def forward(ctx: Any, x: Tensor[P@tp, V@dp]) -> Tensor[I@tp, V@dp]:
        dist.all_reduce(x, group=pgm.dp_group)
        return x  # E: return-value got "Tensor[R@dp, P@tp]", expected "Tensor[V@dp, I@tp]"

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[I@tp, V@dp]) -> Tensor[R@tp, V@dp]:
        return grad_output


class NotReinterpretations(torch.autograd.Function):
    """What no reinterpretation relates: V as R or I, R as P (each copy would count once in the sum)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor[V@tp], r: Tensor[R@tp]) -> tuple[Tensor[R@tp], Tensor[P@tp], Tensor[P@tp]]:
        return x, r, x  # E: return-value got "tuple[Tensor[V@tp], Tensor[R@tp], Tensor[V@tp]]", expected "tuple[Tensor[R@tp], Tensor[P@tp], Tensor[P@tp]]"

    @staticmethod
    def backward(ctx: Any, a: Tensor[P@tp], b: Tensor[R@tp], c: Tensor[R@tp]) -> tuple[Tensor[V@tp], Tensor[P@tp]]:
        return a, b  # E: return-value got "tuple[Tensor[P@tp], Tensor[R@tp]]", expected "tuple[Tensor[V@tp], Tensor[P@tp]]"


def called(x: Tensor[I@tp, V@dp], s: Tensor[S(0)@tp], w: Tensor[S(0)@tp]) -> None:
    reveal_type(CopyToModelParallelRegion.apply(x))  # N: Tensor[V@dp, R@tp]
    reveal_type(DifferentiableAllGather.apply(s))  # N: Tensor[R@tp]
    reveal_type(LinearWithAsyncAllReduce.apply(x, w, w))  # N: Tensor[V@dp, V@tp]


def ordinary_code_reports(x: Tensor[P@tp]) -> Tensor[R@tp]:
    dist.all_reduce(x, group=pgm.tp_group)  # E: spmd-untyped-collective spmd_stubs.all_reduce(x, tp, src=P
    return x  # E: return-value got "Tensor[P@tp]", expected "Tensor[R@tp]"
