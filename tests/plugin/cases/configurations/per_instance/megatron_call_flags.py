"""megatron's call-argument flags: ``tensor_parallel_output_grad=False`` on one gather decides it for that call.

``g`` sets ``tensor_parallel_output_grad = true`` (the gathered value's
gradient pends a sum: ``R@tp``), ``ng`` false (it is whole on every rank:
``I@tp``).  A call passing ``False`` is judged in ``ng`` only, one leaving
the default ``True`` in ``g`` only.  ``skip_bias_add`` is false in both.
"""
import torch.nn.functional as F
from torch import nn

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor
from spmd_stubs.axes import tp

Gathered = Tensor[R[tp]] if spmd.flags.tensor_parallel_output_grad else Tensor[I[tp]]


def gather_from_sequence_parallel_region(input_: Tensor[S(0)@tp], tensor_parallel_output_grad: bool = True
                                         ) -> Gathered:
    if tensor_parallel_output_grad:
        return spmd.all_gather(input_, tp, src=S(0), dst=R)  # backward: reduce-scatter
    return spmd.all_gather(input_, tp, src=S(0), dst=I)  # backward: this rank's split


def column_input(x: Tensor[S(0)@tp], weight: Tensor[S(0)@tp]) -> Tensor[S(-1)@tp]:
    return F.linear(gather_from_sequence_parallel_region(x), weight)


def whole_for_every_rank(x: Tensor[S(0)@tp]) -> Tensor[I@tp]:
    return gather_from_sequence_parallel_region(x, tensor_parallel_output_grad=False)


def whole_as_summed(x: Tensor[S(0)@tp]) -> Tensor[R@tp]:
    """``False`` makes the gradient a split, not a reduce-scatter: the result is not R."""
    return gather_from_sequence_parallel_region(x, tensor_parallel_output_grad=False)  # E[ng]: return-value


def by_position(x: Tensor[S(0)@tp]) -> Tensor[I@tp]:
    return gather_from_sequence_parallel_region(x, False)


class Row(nn.Module):
    weight: Tensor[S(1)@tp]

    def __init__(self, skip_bias_add: bool) -> None:
        super().__init__()
        self.skip_bias_add = skip_bias_add

    def forward(self, x: Tensor[S(-1)@tp]) -> Tensor[I@tp]:
        return spmd.all_reduce(spmd.reinterpret(F.linear(x, self.weight), tp, src=S(-1), dst=P), tp, src=P, dst=I)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.out = Row(skip_bias_add=True)  # E: spmd-configuration skip_bias_add=True is given by no configuration


class Gather(nn.Module):
    """The flag as an argument of a module call: ``self.gather(x, tensor_parallel_output_grad=False)``."""

    def forward(self, input_: Tensor[S(0)@tp], tensor_parallel_output_grad: bool = True) -> Gathered:
        return gather_from_sequence_parallel_region(input_, tensor_parallel_output_grad)


class Whole(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gather = Gather()

    def forward(self, x: Tensor[S(0)@tp]) -> Tensor[I@tp]:
        return self.gather(x, tensor_parallel_output_grad=False)


class WholeAsSummed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gather = Gather()

    def forward(self, x: Tensor[S(0)@tp]) -> Tensor[R@tp]:
        return self.gather(x, tensor_parallel_output_grad=False)  # E[ng]: return-value


def gathered_twice(x: Tensor[S(0)@tp]) -> Tensor[I@tp]:
    """A value from a call judged where the flag is true passed to one judged where it is false: each run
    sees one side as unknown, so only strict mode tells that the gathered value is gathered again."""
    gathered = gather_from_sequence_parallel_region(x)
    return gather_from_sequence_parallel_region(
        gathered, tensor_parallel_output_grad=False)  # E[ng]: spmd-configuration no configuration checks it between

