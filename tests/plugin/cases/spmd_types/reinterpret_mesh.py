"""spmd_types' reinterpret_mesh(x, {axis: T}): the grouping is the meshes' layouts' (run time); what holds under
any grouping is checked, and the result is the declared type."""
import spmd_types as spmd
import torch


def moved(x: torch.Tensor) -> None:
    spmd.assert_type(x, {"dp": spmd.R, "cp": spmd.V, "tp": spmd.V})
    y = spmd.reinterpret_mesh(x, {"dp": spmd.R, "ep": spmd.V})
    reveal_type(y)  # N: Tensor[R@dp, V@ep]


def new_axis_of_another_type(x: torch.Tensor) -> None:
    spmd.assert_type(x, {"dp": spmd.R, "cp": spmd.V, "tp": spmd.V})
    spmd.reinterpret_mesh(x, {"dp": spmd.R, "ep": spmd.R})  # E: spmd-mesh reinterpret_mesh moves V@cp, V@tp to ep


def shared_axis_changed(x: torch.Tensor) -> None:
    spmd.assert_type(x, {"dp": spmd.R, "cp": spmd.V, "tp": spmd.V})
    spmd.reinterpret_mesh(x, {"dp": spmd.V, "ep": spmd.V})  # E: spmd-mesh reinterpret_mesh keeps axis dp
