"""spmd-configuration: a type is chosen by a flag that no configuration sets."""
import spmd_stubs as spmd
from spmd_stubs import I, S, Tensor
from spmd_stubs.axes import tp

Misspelt = Tensor[S[0, tp]] if spmd.flags.sequence_paralel else Tensor[I[tp]]  # E: spmd-configuration no configuration sets the flag spmd.flags.sequence_paralel


def wrong(x: Misspelt) -> None:
    reveal_type(x)  # N: Tensor[S(0)@tp] | torch._tensor.Tensor[I@tp]


Activation = Tensor[S[0, tp]] if spmd.flags.sequence_parallel else Tensor[I[tp]]


def fixed(x: Activation) -> None:
    reveal_type(x)  # N[sp]: Tensor[S(0)@tp] # N[no_sp]: Tensor[I@tp]
