"""spmd-assert: assert_type contradicts the known type."""
import torch

from spmd_stubs import I, P, R, Tensor, V, all_reduce, assert_type
from spmd_stubs.axes import dp, tp


def wrong(x: Tensor[P@tp]) -> None:
    y = assert_type(x, R@tp)  # E: spmd-assert assert_type says R@tp but the value is P@tp


def fixed(x: Tensor[P@tp], batch: torch.Tensor) -> None:
    y = assert_type(all_reduce(x, tp, src=P, dst=R), R@tp)
    b = assert_type(batch, V@dp, I@tp)  # refines an untyped tensor
    reveal_type(b)  # N: Tensor[V@dp, I@tp]
