"""torch.distributed.nn.functional's collectives are the typed transition their forward and backward make."""
import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dnnf
from torch.distributed import ReduceOp
from torch.distributed.device_mesh import DeviceMesh

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import dp, tp


def fitting(p: Tensor[V@dp, P@tp], s: Tensor[S(0)@tp], v: Tensor[I@dp, V@tp], out: torch.Tensor, mesh: DeviceMesh) -> None:
    reveal_type(dnnf.all_reduce(p, group=mesh.get_group("tp")))  # N: Tensor[V@dp, R@tp]
    reveal_type(dist.nn.functional.all_reduce(p, op=ReduceOp.SUM, group=spmd.group_of(tp)))  # N: Tensor[V@dp, R@tp]
    reveal_type(dnnf.all_gather(s, group=spmd.group_of(tp)))  # N: tuple[torch._tensor.Tensor[R@tp], ...]
    reveal_type(dnnf._all_gather_base(out, s, group=spmd.group_of(tp)))  # N: Tensor[R@tp]
    reveal_type(dnnf.reduce_scatter(out, [p, p], group=spmd.group_of(tp)))  # N: Tensor[V@dp, V@tp]
    reveal_type(dnnf.all_to_all([out, out], [v, v], group=spmd.group_of(tp)))  # N: tuple[torch._tensor.Tensor[I@dp, V@tp], ...]
    reveal_type(dnnf.all_to_all_single(out, v, group=spmd.group_of(tp)))  # N: Tensor[I@dp, V@tp]
    reveal_type(dnnf.all_reduce(s))  # N: Tensor[R@tp]


def misfit(i: Tensor[I@tp], p: Tensor[P@tp], out: torch.Tensor) -> None:
    dnnf.all_reduce(i, group=spmd.group_of(tp))  # E: spmd-collective all_reduce is spmd_stubs.all_reduce(x, tp, src=P, dst=R): its backward all-reduces the gradient
    dnnf.all_gather(p, group=spmd.group_of(tp))  # E: spmd-collective reduce-scatters the gradients
    dnnf._all_gather_base(out, i, group=spmd.group_of(tp))  # E: spmd-collective all_gather(x, tp, src=S(0), dst=R)
    dnnf.reduce_scatter(out, [i, i], group=spmd.group_of(tp))  # E: spmd-collective all-gathers the gradient
    dnnf.all_to_all_single(out, p, group=spmd.group_of(tp))  # E: spmd-collective reduce_scatter(x, tp, src=P, dst=V)


def unknown_group(p: Tensor[V@dp, P@tp], i: Tensor[I@tp], group: dist.ProcessGroup) -> None:
    reveal_type(dnnf.all_reduce(i, group=group))  # N: Any
    reveal_type(dnnf.all_reduce(p))  # N: Any
    reveal_type(dnnf.all_reduce(p, op=ReduceOp.MAX, group=spmd.group_of(tp)))  # N: Any


def loss(partial_loss: Tensor[P@tp], invariant_loss: Tensor[I@tp]) -> None:
    dnnf.all_reduce(partial_loss, group=spmd.group_of(tp)).backward()  # E: spmd-backward is R@tp
    dnnf.all_reduce(invariant_loss, group=spmd.group_of(tp)).backward()  # E: spmd-collective src=P, but the input is I@tp  # E: spmd-backward is R@tp
