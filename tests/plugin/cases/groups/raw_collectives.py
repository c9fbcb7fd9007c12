"""Raw collectives name the axis their group stands for: declared in [spmd_mypy] groups, or a literal lookup."""
import torch
import torch.distributed as dist
from megatron.core import parallel_state  # type: ignore[import-untyped]
from megatron.core.parallel_state import get_data_parallel_group, get_tensor_model_parallel_group  # type: ignore[import-untyped]
from torch.distributed.device_mesh import DeviceMesh

import spmd_stubs as spmd
from spmd_stubs import P, Tensor, V
from spmd_stubs.axes import dp, tp


class Layer:
    tp_group: dist.ProcessGroup

    def forward(self, x: Tensor[V@dp, P@tp], y: Tensor[V@dp]) -> None:
        dist.all_reduce(x, group=self.tp_group)  # E: spmd-untyped-collective on axis tp changes values the checker cannot see In `dist.all_reduce(x, group=self.tp_group)`: the tensor's SPMD type there (and its gradient) would be wrong afterwards. Fix (needs your choice): use the typed spmd_stubs.all_reduce(x, tp, src=P
        dist.all_reduce(y, group=self.tp_group)  # E: spmd-untyped-collective the tensor has no SPMD type on axis tp, the group's axis


def declared_function(x: Tensor[V@dp, P@tp], out: torch.Tensor) -> None:
    dist.reduce_scatter_tensor(out, x, group=get_tensor_model_parallel_group())  # E: spmd-untyped-collective spmd_stubs.reduce_scatter(x, tp, src=P, dst=V
    dist.all_reduce(x, group=parallel_state.get_tensor_model_parallel_group())  # E: spmd-untyped-collective spmd_stubs.all_reduce(x, tp, src=P


def mesh_lookups(x: Tensor[V@dp, P@tp], out: torch.Tensor, mesh: DeviceMesh) -> None:
    dist.all_gather_into_tensor(out, x, group=mesh.get_group("dp"))  # E: spmd-untyped-collective spmd_stubs.all_gather(x, dp, src=V
    dist.all_reduce(x, group=mesh.get_group(mesh_dim="tp"))  # E: spmd-untyped-collective spmd_stubs.all_reduce(x, tp, src=P
    dist.all_to_all_single(out, x, group=mesh["dp"].get_group())  # E: spmd-untyped-collective spmd_stubs.all_to_all(x, dp, src=V
    dist.all_reduce(x, group=spmd.group_of(tp))  # E: spmd-untyped-collective spmd_stubs.all_reduce(x, tp, src=P


def undeclared(x: Tensor[V@dp, P@tp], group: dist.ProcessGroup) -> None:
    dist.all_reduce(x, group=get_data_parallel_group())  # E: spmd-untyped-collective `groups = megatron.core.parallel_state.get_data_parallel_group: AXIS`
    dist.all_reduce(x, group=group)  # E: spmd-untyped-collective which the checker cannot tell from this group
    dist.all_reduce(x)  # E: spmd-untyped-collective on every axis of the default group
