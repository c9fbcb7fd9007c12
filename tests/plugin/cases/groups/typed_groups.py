"""Process groups as values: Group[tp] annotations, groups carried by mypy, followed through locals and ctx."""
from typing import Any, Optional

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh

import spmd_stubs as spmd
from spmd_stubs import Group, I, P, R, Tensor
from spmd_stubs.axes import dp, tp


class ReduceFromRegion(torch.autograd.Function):
    """megatron's _ReduceFromModelParallelRegion, its group a parameter typed by its axis."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor[P@tp], group: Group[tp]) -> Tensor[I@tp]:
        dist.all_reduce(input_, group=group)
        return input_

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[I@tp]) -> tuple[Tensor[R@tp], None]:
        return grad_output, None


class CopyToRegion(torch.autograd.Function):
    """nanotron's DifferentiableIdentity: the group kept on ctx in forward, read back in backward."""

    @staticmethod
    def forward(ctx: Any, tensor: Tensor[I@tp], group: Optional[Group[tp]]) -> Tensor[R@tp]:
        ctx.group = group
        return tensor

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[P@tp]) -> tuple[Tensor[I@tp], None]:
        group = ctx.group
        dist.all_reduce(grad_output, group=group)
        return grad_output, None


class ForgotTheReduction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, tensor: Tensor[I@tp], group: Group[tp]) -> Tensor[R@tp]:
        ctx.group = group
        return tensor

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[P@tp]) -> tuple[Tensor[I@tp], None]:
        return grad_output, None  # E: return-value got "tuple[Tensor[P@tp], None]", expected "tuple[Tensor[I@tp], None]"


class ReducedOverTheWrongAxis(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, input_: Tensor[P@tp], group: Group[dp]) -> Tensor[I@tp]:
        dist.all_reduce(input_, group=group)
        return input_  # E: return-value got "Tensor[P@tp]", expected "Tensor[I@tp]"

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[I@tp]) -> tuple[Tensor[R@tp], None]:
        return grad_output, None


def groups_carry_their_axis(mesh: DeviceMesh, data_parallel: Group[dp], x: Tensor[P@tp]) -> None:
    reveal_type(spmd.group_of(tp))  # N: ProcessGroup[tp]
    reveal_type(mesh.get_group("tp"))  # N: ProcessGroup[tp]
    reveal_type(spmd.group_of((dp, tp)))  # N: ProcessGroup[Any]
    ReduceFromRegion.apply(x, mesh.get_group("tp"))
    ReduceFromRegion.apply(x, data_parallel)  # E: arg-type "ProcessGroup[dp]"; expected "ProcessGroup[tp]"
    ReduceFromRegion.apply(x, mesh.get_group(0))


def a_local_group(x: Tensor[P@tp], mesh: DeviceMesh) -> None:
    group = mesh.get_group("tp")
    dist.all_reduce(x, group=group)  # E: spmd-untyped-collective spmd_stubs.all_reduce(x, tp, src=P, dst=R or I)


def an_untyped_group_parameter(x: Tensor[P@tp], group: dist.ProcessGroup) -> None:
    dist.all_reduce(x, group=group)  # E: spmd-untyped-collective `group: spmd_stubs.Group[AXIS]`


bad: Group[int]  # E: spmd-annotation 'int' is not a mesh axis


class Manager:
    tp_pg: dist.ProcessGroup
    cp_group: dist.ProcessGroup


manager = Manager()


class Reduce(torch.autograd.Function):
    """picotron's g: the group named for the axis the Function is typed on (no declaration needed)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor[P@tp]) -> Tensor[I@tp]:
        dist.all_reduce(x, group=manager.tp_pg)
        return x

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[I@tp]) -> Tensor[R@tp]:
        return grad_output


class ReduceOverAnotherAxis(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor[P@tp]) -> Tensor[I@tp]:
        dist.all_reduce(x, group=manager.cp_group)
        return x  # E: return-value got "Tensor[P@tp]", expected "Tensor[I@tp]"

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[I@tp]) -> Tensor[R@tp]:
        return grad_output


class ReduceFedByItsCalls(torch.autograd.Function):
    """A group parameter typed ``ProcessGroup``: every call in the module passes the group of tp."""

    @staticmethod
    def forward(ctx: Any, x: Tensor[P@tp], group: dist.ProcessGroup) -> Tensor[I@tp]:
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[I@tp]) -> tuple[Tensor[R@tp], None]:
        return grad_output, None


class ReduceFedTwoAxes(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor[P@tp], group: dist.ProcessGroup) -> Tensor[I@tp]:
        dist.all_reduce(x, group=group)
        return x  # E: return-value got "Tensor[P@tp]", expected "Tensor[I@tp]"

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[I@tp]) -> tuple[Tensor[R@tp], None]:
        return grad_output, None


def reduce_from_tensor_model_parallel_region(x: Tensor[P@tp]) -> Tensor[I@tp]:
    return ReduceFedByItsCalls.apply(x, spmd.group_of(tp))


def callers_disagree(x: Tensor[P@tp]) -> None:
    ReduceFedTwoAxes.apply(x, spmd.group_of(tp))
    ReduceFedTwoAxes.apply(x, spmd.group_of(dp))


def _reduce(input_: Tensor[P@tp], group: dist.ProcessGroup) -> Tensor[I@tp]:
    """megatron's _reduce: its world-size-1 bypass, its group from its one caller."""
    if group.size() == 1:
        return input_
    return input_  # E: return-value got "Tensor[P@tp]", expected "Tensor[I@tp]"


def reduce_through_a_helper(x: Tensor[P@tp]) -> Tensor[I@tp]:
    return _reduce(x, group=spmd.group_of(tp))


class CopyWithADefaultGroup(torch.autograd.Function):
    """nanotron's backward: the group read from ctx, the default group its fallback for a None the types rule out."""

    @staticmethod
    def forward(ctx: Any, x: Tensor[I@tp], group: Group[tp]) -> Tensor[R@tp]:
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx: Any, grad: Tensor[P@tp]) -> tuple[Tensor[I@tp], None]:
        group = ctx.group
        if group is None:
            group = dist.distributed_c10d._get_default_group()
        dist.all_reduce(grad, group=group)
        return grad, None


class ReboundToAnotherGroup(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor[P@tp], group: Group[tp]) -> Tensor[I@tp]:
        ctx.group = group
        ctx.group = dist.new_group([0])
        dist.all_reduce(x, group=ctx.group)
        return x  # E: return-value got "Tensor[P@tp]", expected "Tensor[I@tp]"

    @staticmethod
    def backward(ctx: Any, grad: Tensor[I@tp]) -> tuple[Tensor[R@tp], None]:
        return grad, None
