"""A parameter rebound in a branch that returns keeps its own type after the branch (spmd_mypy/rebinding.py).

Under mypy's allow_redefinition, which the plugin turns on, mypy alone would
type a plain tensor rebound in a returning branch as ``Tensor[Any] |
Tensor[R@tp]`` after the ``if``, and report the call that follows
(tests/plugin/test_branch_rebinding.py keeps mypy's own repro).  The shapes
are megatron's and picotron's ``if world_size == 1: input_ = f(input_);
return input_``.
"""
import torch
import torch.nn.functional as F
from torch import nn

import spmd_stubs as spmd
from spmd_stubs import I, R, S, Tensor
from spmd_stubs.axes import dp, tp


def world_size() -> int:
    return 1


def gather(input_: Tensor[S(0)@tp]) -> Tensor[R@tp]:
    return spmd.all_gather(input_, tp, src=S(0), dst=R)


def enter(input_: Tensor[I@tp]) -> Tensor[R@tp]:
    return spmd.convert(input_, tp, src=I, dst=R)


def gather_along_first_dim(input_: torch.Tensor) -> Tensor[R@tp]:
    """megatron's ``_gather_along_first_dim``, with its early exit rebinding the input."""
    if world_size() == 1:
        input_ = enter(input_)
        reveal_type(input_)  # N: Tensor[R@tp]
        return input_
    reveal_type(input_)  # N: Tensor[Any]
    return gather(input_)


class ColumnParallelLinear(nn.Module):
    """picotron's layer: the single-rank exit returns early, the rest gathers."""

    weight: Tensor[S(0)@tp]

    def forward(self, input_: torch.Tensor) -> Tensor[S(-1)@tp]:
        if world_size() == 1:
            input_ = enter(input_)
            return F.linear(input_, self.weight)
        return F.linear(gather(input_), self.weight)


def raised(input_: torch.Tensor, check: bool) -> Tensor[R@tp]:
    if check:
        input_ = enter(input_)
        raise ValueError(input_)
    return gather(input_)


def each_branch(input_: torch.Tensor, small: bool, replicated: bool) -> Tensor[R@tp]:
    """Each branch that returns has its own rebinding; the one that falls through sees the input."""
    if small:
        input_ = enter(input_)
        return input_
    elif replicated:
        reveal_type(input_)  # N: Tensor[Any]
        input_ = enter(input_)
        return input_
    else:
        reveal_type(input_)  # N: Tensor[Any]
    return gather(input_)


def nested(input_: torch.Tensor, small: bool, twice: bool) -> Tensor[R@tp]:
    if small:
        input_ = enter(input_)
        if twice:
            input_ = spmd.convert(input_, tp, src=R, dst=R)
            return input_
        reveal_type(input_)  # N: Tensor[R@tp]
        return input_
    return gather(input_)


def typed(input_: Tensor[I@tp], small: bool) -> Tensor[R@tp]:
    """Two SPMD types that agree on every axis both mention overlap as much as a plain tensor does."""
    if small:
        input_ = spmd.convert(input_, dp, src=I, dst=R)
        raise NotImplementedError("replicated on dp")
    reveal_type(input_)  # N: Tensor[I@tp]
    return enter(input_)


def each_iteration(input_: torch.Tensor, steps: list[bool]) -> None:
    """A ``continue`` carries the rebinding into the next iteration: mypy's union is what flows there."""
    for skip in steps:
        if skip:
            input_ = enter(input_)  # E: arg-type
            continue
        reveal_type(input_)  # N: Tensor[Any] | torch._tensor.Tensor[R@tp]
