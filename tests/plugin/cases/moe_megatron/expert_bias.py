"""A row-parallel expert's bias joins its output after the tp reduction, as in megatron's SequentialMLP."""
from spmd_stubs import I, P, R, Tensor
from spmd_stubs.axes import tp
from spmd_stubs.megatron import reduce_from_tensor_model_parallel_region


def bias_after_reduction(partial_out: Tensor[P@tp], bias: Tensor[I@tp]) -> Tensor[I@tp]:
    return reduce_from_tensor_model_parallel_region(partial_out) + bias


def bias_before_reduction(partial_out: Tensor[P@tp], bias: Tensor[R@tp]) -> None:
    partial_out + bias  # E: spmd-partial-affine add adds a Partial to a non-Partial operand on axis tp (P@tp + R@tp)
