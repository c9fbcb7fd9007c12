"""Vocab-parallel softmax: the logits' last dim (the vocabulary) is sharded over ``tp``.

The softmax needs the max over the whole vocabulary (for stability) and the
sum of the exponentials over it.  Each rank computes both over its slice;
the slice's max is a *part of a pending max* (``Pmax@tp``), resolved by an
all-reduce with max, and the slice's sum a part of a pending sum.

Values and gradients equal the single-device ``torch.softmax`` /
``torch.log_softmax`` (tests/runtime/test_partials_sim.py and _gloo.py).  The
gradient reaching the max is split among the ranks whose slice attains it, as
``torch.amax`` splits it among tying entries (it adds up to about zero here:
the softmax does not depend on the shift).
"""

from __future__ import annotations

import torch

import spmd_stubs as spmd
from spmd_stubs import Pmax, R, S, Tensor, V
from spmd_stubs.axes import tp


def _shifted(logits: Tensor[S(-1)@tp]) -> Tensor[V@tp]:
    """``logits`` minus the max over the whole vocabulary (on every rank)."""
    local_max = logits.amax(-1, keepdim=True)  # V@tp: the max of this rank's slice
    pending = spmd.reinterpret(local_max, tp, src=V, dst=Pmax)  # Pmax@tp
    vocab_max = spmd.all_reduce(pending, tp, src=Pmax, dst=R)  # R@tp
    return logits - vocab_max


def vocab_parallel_softmax(logits: Tensor[S(-1)@tp]) -> Tensor[V@tp]:
    """This rank's slice of ``softmax(logits, -1)`` over the whole vocabulary."""
    exp = _shifted(logits).exp()
    total = spmd.all_reduce(exp.sum(-1, keepdim=True), tp, src=V, dst=R)
    return exp / total


def vocab_parallel_log_softmax(logits: Tensor[S(-1)@tp]) -> Tensor[V@tp]:
    """This rank's slice of ``log_softmax(logits, -1)`` over the whole vocabulary."""
    shifted = _shifted(logits)
    total = spmd.all_reduce(shifted.exp().sum(-1, keepdim=True), tp, src=V, dst=R)
    return shifted - torch.log(total)
