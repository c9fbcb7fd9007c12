"""Strict mode names a ``mutate_type`` whose axis is not written out: the typed value is unknown after it."""
import spmd_types as spmd
import torch


def over_axes_passed_in(offsets: torch.Tensor, axes: tuple[str, ...]) -> None:
    spmd.assert_type(offsets, {"dp": spmd.R, "cp": spmd.R})
    for axis in axes:
        spmd.mutate_type(offsets, axis, src=spmd.R, dst=spmd.V)  # E: spmd-untyped-boundary spmd.mutate_type's axis, src or dst is not written out: offsets (R@cp, R@dp) is unknown after it


def over_axes_written_out(offsets: torch.Tensor) -> None:
    spmd.assert_type(offsets, {"dp": spmd.R, "cp": spmd.R})
    for axis in ("cp", "dp"):
        spmd.mutate_type(offsets, axis, src=spmd.R, dst=spmd.V)
    reveal_type(offsets)  # N: Tensor[V@cp, V@dp]
