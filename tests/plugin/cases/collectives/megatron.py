"""Every Megatron mapping helper types like its typed equivalent (spmd_stubs/core/megatron_table.py)."""
import torch

from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import dp, ep, tp
from spmd_stubs.megatron import (
    all_gather_last_dim_from_tensor_parallel_region,
    all_to_all,
    copy_to_tensor_model_parallel_region,
    gather_from_sequence_parallel_region,
    gather_from_tensor_model_parallel_region,
    reduce_from_tensor_model_parallel_region,
    reduce_scatter_last_dim_to_tensor_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
    scatter_to_sequence_parallel_region,
    scatter_to_tensor_model_parallel_region,
)


def clean(i: Tensor[I@tp, V@dp], p: Tensor[P@tp, V@dp], s: Tensor[S(0)@tp], last: Tensor[S(-1)@tp], e: Tensor[V@ep]) -> None:
    reveal_type(copy_to_tensor_model_parallel_region(i))  # N: Tensor[V@dp, R@tp]
    reveal_type(reduce_from_tensor_model_parallel_region(p))  # N: Tensor[V@dp, I@tp]
    reveal_type(scatter_to_tensor_model_parallel_region(i))  # N: Tensor[V@dp, S(-1)@tp]
    reveal_type(gather_from_tensor_model_parallel_region(last))  # N: Tensor[I@tp]
    reveal_type(scatter_to_sequence_parallel_region(i))  # N: Tensor[V@dp, S(0)@tp]
    reveal_type(gather_from_sequence_parallel_region(s))  # N: Tensor[R@tp]
    reveal_type(gather_from_sequence_parallel_region(s, True))  # N: Tensor[R@tp]
    reveal_type(gather_from_sequence_parallel_region(s, tensor_parallel_output_grad=False))  # N: Tensor[I@tp]
    reveal_type(reduce_scatter_to_sequence_parallel_region(p))  # N: Tensor[V@dp, S(0)@tp]
    reveal_type(all_gather_last_dim_from_tensor_parallel_region(last))  # N: Tensor[R@tp]
    reveal_type(reduce_scatter_last_dim_to_tensor_parallel_region(p))  # N: Tensor[V@dp, S(-1)@tp]
    reveal_type(all_to_all(None, e))  # N: Tensor[S(0)@ep]


def untyped_input(t: torch.Tensor) -> None:
    reveal_type(copy_to_tensor_model_parallel_region(t))  # N: Tensor[R@tp]


def wrong_inputs(r: Tensor[R@tp], p: Tensor[P@tp], v: Tensor[V@tp]) -> None:
    copy_to_tensor_model_parallel_region(r)  # E: spmd-collective convert is told src=I, but the input is R@tp
    reveal_type(reduce_from_tensor_model_parallel_region(v))  # N: Tensor[I@tp]
    reduce_from_tensor_model_parallel_region(r)  # E: spmd-collective all_reduce is told src=P, but the input is R@tp
    gather_from_sequence_parallel_region(p)  # E: spmd-collective all_gather is told src=S(0), but the input is P@tp
    reduce_scatter_to_sequence_parallel_region(r)  # E: spmd-collective
