"""spmd-unmodelled (strict only): an op the checker does not model got a typed tensor; its result is unknown."""
import torch

from spmd_stubs import R, Tensor, assert_type
from spmd_stubs.axes import tp


def wrong(x: Tensor[R@tp], t: torch.Tensor) -> None:
    # map_ applies a Python function to each pair of elements, which no rule over the operands' types can follow.
    y = x.map_(x, max)  # E: spmd-unmodelled map_ is not modelled by the SPMD checker
    z = t.map_(t, max)  # untyped operands: nothing to report
    n = x.size(0) + x.numel() + x.dim()  # no tensor results: nothing to type


def buffer(x: Tensor[R@tp]) -> Tensor[R@tp]:
    # A *_like factory copies its operand's shape, not its values: the buffer's type is what it will hold.
    scratch = torch.empty_like(x)  # E: spmd-unmodelled empty_like takes only the shape of its Tensor[R@tp] operand
    declared: Tensor[R@tp] = torch.zeros_like(x)
    return declared + x


def fixed(x: Tensor[R@tp]) -> None:
    y = assert_type(torch.exp(x) + torch.exp(x), R@tp)
    reveal_type(y)  # N: Tensor[R@tp]

