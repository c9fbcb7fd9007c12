"""Seeded faults: a backward that is not the per-axis dual of its forward is an spmd-autograd error."""
from typing import Any, Optional

import torch
import torch.nn.functional as F

from spmd_stubs import I, P, R, S, Tensor, V, all_gather, all_reduce, convert, reduce_scatter
from spmd_stubs.axes import dp, tp


class CopyWithoutAllReduce(torch.autograd.Function):
    """The backward of I -> R must all-reduce: its gradient arrives P, not R."""

    @staticmethod
    def forward(ctx: Any, x: Tensor[I@tp]) -> Tensor[R@tp]:
        return convert(x, tp, src=I, dst=R)

    @staticmethod
    def backward(ctx: Any, g: Tensor[R@tp]) -> Tensor[I@tp]:  # E: spmd-autograd `CopyWithoutAllReduce.backward` parameter 1 (`g`) is R@tp on axis tp it is the gradient of forward's output 1, R@tp, whose dual is P@tp. Fix (needs your choice): annotate it Tensor[P@tp]
        return convert(g, tp, src=R, dst=I, expert_mode=True)


class ReduceTypingItsGradientInvariant(torch.autograd.Function):
    """Megatron's reduce returns its gradient unchanged, but the gradient of a P input is R, not I."""

    @staticmethod
    def forward(ctx: Any, x: Tensor[P@tp]) -> Tensor[I@tp]:
        return all_reduce(x, tp, src=P, dst=I)

    @staticmethod
    def backward(ctx: Any, g: Tensor[I@tp]) -> Tensor[I@tp]:  # E: spmd-autograd return 1 is I@tp on axis tp it is the gradient of forward's argument 1 (`x`), P@tp, whose dual is R@tp
        return g


class ReduceReturningPartial(torch.autograd.Function):
    """The gradient of a P input is R, not P."""

    @staticmethod
    def forward(ctx: Any, x: Tensor[P@tp, V@dp]) -> Tensor[I@tp, V@dp]:
        return all_reduce(x, tp, src=P, dst=I)

    @staticmethod
    def backward(ctx: Any, g: Tensor[I@tp, V@dp]) -> Tensor[P@tp, V@dp]:  # E: spmd-autograd return 1 is P@tp on axis tp it is the gradient of forward's argument 1 (`x`), P@tp, whose dual is R@tp. Fix (needs your choice): annotate it Tensor[V@dp, R@tp]
        return convert(g, tp, src=I, dst=P, expert_mode=True)


class GatherWithWrongSplit(torch.autograd.Function):
    """V -> R gathers; its backward gets P and must reduce-scatter to V, not return R."""

    @staticmethod
    def forward(ctx: Any, x: Tensor[V@tp]) -> Tensor[R@tp]:
        return all_gather(x, tp, src=V, dst=R)

    @staticmethod
    def backward(ctx: Any, g: Tensor[R@tp]) -> Tensor[R@tp]:  # E: spmd-autograd parameter 1 (`g`) is R@tp on axis tp # E: spmd-autograd return 1 is R@tp on axis tp it is the gradient of forward's argument 1 (`x`), V@tp, whose dual is V@tp
        return g


class TooFewGradients(torch.autograd.Function):
    """Two inputs (one a plain int) take two gradients (None for the int)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor[P@tp], dim: int) -> Tensor[S(0)@tp]:
        return reduce_scatter(x, tp, src=P, dst=S(0))

    @staticmethod
    def backward(ctx: Any, g: Tensor[S(0)@tp]) -> Tensor[R@tp]:  # E: spmd-autograd `TooFewGradients.backward` returns 1 gradient(s) but forward takes 2 input(s)
        return all_gather(g, tp, src=S(0), dst=R)


class GradientForAnUnannotatedBias(torch.autograd.Function):
    """An unannotated forward parameter (an Optional bias) may be a tensor: its gradient is not refused."""

    @staticmethod
    def forward(ctx: Any, x: Tensor[S(-1)@tp], w: Tensor[S(1)@tp], bias) -> Tensor[S(0)@tp]:
        return F.linear(x, w, bias)

    @staticmethod
    def backward(ctx: Any, g: Tensor[S(0)@tp]) -> tuple[Tensor[S(-1)@tp], Tensor[S(1)@tp], Optional[torch.Tensor]]:
        return g, g, g.sum(0)


class GradientForAnInt(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor[P@tp], dim: int) -> Tensor[S(0)@tp]:
        return reduce_scatter(x, tp, src=P, dst=S(0))

    @staticmethod
    def backward(ctx: Any, g: Tensor[S(0)@tp]) -> tuple[Tensor[R@tp], Tensor[R@tp]]:  # E: spmd-autograd return 2 is a tensor, but forward's argument 2 (`dim`) is not a tensor and takes no gradient Fix (needs your choice): return None there
        r = all_gather(g, tp, src=S(0), dst=R)
        return r, r


class TwoOutputsOneGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor[I@tp]) -> tuple[Tensor[R@tp], Tensor[I@tp]]:
        return convert(x, tp, src=I, dst=R), x

    @staticmethod
    def backward(ctx: Any, g: Tensor[P@tp]) -> Tensor[I@tp]:  # E: spmd-autograd `TwoOutputsOneGradient.backward` takes 1 gradient(s) but forward returns 2 output(s)
        return all_reduce(g, tp, src=P, dst=I)


class OptionalGradients(torch.autograd.Function):
    """Any input may get None; a shard's gradient is the same shard; an unmentioned axis is unconstrained."""

    @staticmethod
    def forward(ctx: Any, x: Tensor[S(1)@tp], y: Tensor[I@tp]) -> tuple[Tensor[S(1)@tp], Tensor[R@tp]]:
        return x, convert(y, tp, src=I, dst=R)

    @staticmethod
    def backward(ctx: Any, gx: Tensor[S(1)@tp, V@dp], gy: torch.Tensor) -> tuple[Optional[Tensor[S(1)@tp]], None]:
        return gx, None


class PlainBackward(torch.autograd.Function):
    """A backward without SPMD types is not checked."""

    @staticmethod
    def forward(ctx: Any, x: Tensor[I@tp]) -> Tensor[R@tp]:
        return convert(x, tp, src=I, dst=R)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g


class VariadicGradients(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor[I@tp]) -> Tensor[R@tp]:
        return convert(x, tp, src=I, dst=R)

    @staticmethod
    def backward(ctx: Any, *grads: Tensor[P@tp]) -> Tensor[I@tp]:
        return all_reduce(grads[0], tp, src=P, dst=I)


class _MappingBase(torch.autograd.Function):
    """A project's own base for its Functions (nanotron's style): its subclasses are checked too."""


class ThroughAnOwnBase(_MappingBase):
    @staticmethod
    def forward(ctx: Any, x: Tensor[I@tp]) -> Tensor[R@tp]:
        return x

    @staticmethod
    def backward(ctx: Any, g: Tensor[R@tp]) -> Tensor[I@tp]:  # E: spmd-autograd `ThroughAnOwnBase.backward` parameter 1 (`g`) is R@tp on axis tp
        return g


def through_an_own_base(x: Tensor[I@tp]) -> None:
    reveal_type(ThroughAnOwnBase.apply(x))  # N: Tensor[R@tp]
