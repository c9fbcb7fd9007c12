"""How a configuration decides conditions: not/and/or, comparisons, elif chains, conditional expressions.

A condition the flags do not decide (an unknown flag, a call) leaves both
branches checked, as without configurations.
"""
from typing import Any

import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor
from spmd_stubs.axes import tp

Activation = Tensor[S[0, tp]] if spmd.flags.sequence_parallel else Tensor[I[tp]]
NotSp = Tensor[I[tp]] if not spmd.flags.sequence_parallel else Tensor[S[0, tp]]

class Options:
    flags: Any


# A value chosen by some object's flags is left as written: only types (Tensor[...]) become a union.
kernel = "fused" if Options().flags.fast else None
reveal_type(kernel)  # N: str | None


def same_alias(x: Activation) -> NotSp:
    return x


def negated(x: Activation, sequence_parallel: bool) -> Tensor[R@tp]:
    if not sequence_parallel:
        return spmd.convert(x, tp, src=I, dst=R)
    return spmd.all_gather(x, tp, src=S(0), dst=R)


def elif_chain(x: Activation, tp_mode: str) -> Tensor[R@tp]:
    if tp_mode == "ALL_REDUCE":
        return spmd.convert(x, tp, src=I, dst=R)
    elif tp_mode != "REDUCE_SCATTER":
        return x  # unreachable in both configurations: nothing reported
    else:
        return spmd.all_gather(x, tp, src=S(0), dst=R)


def undecided(x: Tensor[I@tp], y: Tensor[P@tp], recompute: bool) -> Tensor[I@tp]:
    if recompute:  # no configuration sets recompute: both branches checked, in both configurations
        return x + y  # E: spmd-invariant-mix
    return x


def and_or(x: Activation, w: Tensor[I@tp], sequence_parallel: bool, recompute: bool) -> Activation:
    if sequence_parallel and recompute:  # undecided in sp, false in no_sp
        return F.layer_norm(x, x.shape[-1:], w)  # E[sp]: spmd-invariant-mix
    if sequence_parallel or recompute:  # true in sp, undecided in no_sp
        return F.layer_norm(x, x.shape[-1:], spmd.convert(w, tp, src=I, dst=R)) if sequence_parallel else x
    return F.layer_norm(x, x.shape[-1:], w)


def conditional(x: Activation, sequence_parallel: bool) -> Tensor[R@tp]:
    return spmd.all_gather(x, tp, src=S(0), dst=R) if sequence_parallel else spmd.convert(x, tp, src=I, dst=R)


def reveal(x: Activation) -> None:
    reveal_type(x)  # N[sp]: Tensor[S(0)@tp] # N[no_sp]: Tensor[I@tp]
