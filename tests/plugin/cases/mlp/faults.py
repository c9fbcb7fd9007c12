"""The MLP's classic bugs, each flagged at its line."""
import torch.nn.functional as F

from spmd_stubs import I, P, R, S, Tensor, V, all_gather, all_reduce, convert, reinterpret
from spmd_stubs.axes import tp


def dropped_copy_to_region(x: Tensor[I@tp], w1: Tensor[S(0)@tp]) -> None:
    h = F.linear(x, w1)  # E: spmd-invariant-mix convert(x, tp, src=I, dst=R)


def bias_before_reduction(h: Tensor[V@tp], w2: Tensor[S(1)@tp], bias: Tensor[I@tp]) -> None:
    partial = reinterpret(F.linear(h, w2), tp, src=V, dst=P)
    y = all_reduce(partial + bias, tp, src=P, dst=I)  # E: spmd-invariant-mix


def replicated_bias_before_reduction(h: Tensor[V@tp], w2: Tensor[S(1)@tp], bias: Tensor[R@tp]) -> None:
    partial = reinterpret(F.linear(h, w2), tp, src=V, dst=P)
    y = all_reduce(partial + bias, tp, src=P, dst=I)  # E: spmd-partial-affine


def gathered_replicate_loss(logits: Tensor[S(-1)@tp], target: Tensor[R@tp]) -> None:
    full = all_gather(logits, tp, src=S(-1), dst=R)
    loss = F.cross_entropy(full, target)
    loss.backward()  # E: spmd-backward R@tp


def invariant_norm_weight_on_sequence_parallel(x: Tensor[S(0)@tp], weight: Tensor[I@tp]) -> None:
    normed = F.rms_norm(x, [1024], weight)  # E: spmd-invariant-mix


def partial_times_partial(a: Tensor[P@tp], b: Tensor[P@tp]) -> None:
    c = a * b  # E: spmd-partial-mul
