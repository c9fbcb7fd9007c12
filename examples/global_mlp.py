"""Small programs written in global SPMD on ``tp``, and their single-device meaning.

Inside ``@spmd.global_spmd(tp)`` a tensor typed ``S(i)@tp`` is one piece of a
single global tensor (the ranks' pieces concatenated on dim ``i``), and each
line means what it means on the global tensors.  So every program here
computes, on each rank, its piece of what :data:`REFERENCES` computes on one
device from the full tensors: that is what ``tests/runtime/test_global_mode.py``
checks on 4 gloo ranks and in the simulated world, values and gradients.

A contraction or reduction over a ``tp``-sharded dim is never silently
partial: it says ``out_partial_axes=tp`` and the result is ``P@tp`` until an
explicit ``all_reduce``.  :func:`mlp_local_tail` writes the same MLP's
row-parallel half in local SPMD (a ``local_map`` region), side by side with
:func:`row_parallel_linear`.

``dp`` is never mentioned: it stays local, and each dp group runs its own
instance on its own data.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import P, Pmax, R, S, Tensor, V
from spmd_stubs.axes import tp


@spmd.global_spmd(tp)
def row_parallel_linear(x: Tensor[S(-1)@tp], w: Tensor[S(1)@tp]) -> Tensor[R@tp]:
    """``x @ w.T`` with the contracted dim split over tp (Megatron's row-parallel linear).

    Each rank multiplies its pieces: a part of the global product, which
    ``out_partial_axes=tp`` declares (``P@tp``); the all-reduce sums the parts.
    """
    y: Tensor[P@tp] = spmd.linear(x, w, out_partial_axes=tp)
    return spmd.all_reduce(y, tp, src=P, dst=R)


@spmd.global_spmd(tp)
def column_parallel_linear(x: Tensor[R@tp], w: Tensor[S(0)@tp]) -> Tensor[S(-1)@tp]:
    """``x @ w.T`` with w's output rows split over tp: the output columns are split the same way.

    No dim that is split is contracted, so the local product *is* this
    rank's piece of the global product: nothing to declare, nothing to reduce.
    """
    return spmd.linear(x, w)


@spmd.global_spmd(tp)
def mlp(x: Tensor[R@tp], w1: Tensor[S(0)@tp], w2: Tensor[S(1)@tp]) -> Tensor[R@tp]:
    """``gelu(x @ w1.T) @ w2.T``: column-parallel, elementwise, row-parallel."""
    h: Tensor[S(-1)@tp] = F.gelu(column_parallel_linear(x, w1))
    return row_parallel_linear(h, w2)


@spmd.global_spmd(tp)
def mlp_local_tail(x: Tensor[R@tp], w1: Tensor[S(0)@tp], w2: Tensor[S(1)@tp]) -> Tensor[R@tp]:
    """The same MLP with its row-parallel half in local SPMD, as it reads without global mode."""
    h: Tensor[S(-1)@tp] = F.gelu(spmd.linear(x, w1))

    @spmd.local_map(tp)
    def row_parallel_local(h: Tensor[V@tp], w: Tensor[V@tp]) -> Tensor[P@tp]:
        # Local: the per-rank product, then "I mean the sum of these over tp".
        return spmd.reinterpret(h @ w.T, tp, src=V, dst=P)

    return spmd.all_reduce(row_parallel_local(h, w2), tp, src=P, dst=R)


@spmd.global_spmd(tp)
def row_norms(x: Tensor[S(1)@tp]) -> Tensor[R@tp]:
    """The 2-norm of every row of ``x``, whose columns are split over tp.

    The sum runs over the split dim: each rank sums its columns
    (``out_partial_axes=tp``), the all-reduce adds the ranks' sums.
    """
    partial_sums: Tensor[P@tp] = spmd.sum(x * x, 1, out_partial_axes=tp)
    return spmd.all_reduce(partial_sums, tp, src=P, dst=R).sqrt()


@spmd.global_spmd(tp)
def batched_chain(a: Tensor[S(0)@tp], b: Tensor[S(0)@tp], m: Tensor[R@tp]) -> Tensor[S(0)@tp]:
    """``a[n] @ b[n] @ m`` for every batch entry n, the batch split over tp: no communication.

    The batch label is split on tp in both operands that use it and in the
    output; ``m`` does not use it and is whole on every rank.
    """
    return spmd.einsum("nij,njk,kl->nil", a, b, m)


@spmd.global_spmd(tp)
def contracted_einsum(a: Tensor[S(1)@tp], b: Tensor[S(0)@tp]) -> Tensor[R@tp]:
    """``a @ b`` as an einsum whose contracted label ``j`` is split over tp."""
    parts: Tensor[P@tp] = spmd.einsum("ij,jk->ik", a, b, out_partial_axes=tp)
    return spmd.all_reduce(parts, tp, src=P, dst=R)


@spmd.global_spmd(tp)
def contracted_matmul(a: Tensor[S(-1)@tp], b: Tensor[S(0)@tp]) -> Tensor[R@tp]:
    """``a @ b`` (batched ``a``) with the contracted dim split over tp."""
    parts: Tensor[P@tp] = spmd.matmul(a, b, out_partial_axes=tp)
    return spmd.all_reduce(parts, tp, src=P, dst=R)


@spmd.global_spmd(tp)
def vocab_max(logits: Tensor[S(-1)@tp]) -> Tensor[R@tp]:
    """The max over the vocabulary (the last dim, split over tp) of every row of logits.

    Each rank's max over its slice is a part of a pending *max*
    (``out_partial_axes=tp`` on ``amax`` gives ``Pmax@tp``), resolved by an
    all-reduce with max.  The gradient goes to the rank whose slice holds it.
    """
    local_max: Tensor[Pmax@tp] = spmd.amax(logits, -1, out_partial_axes=tp)
    return spmd.all_reduce(local_max, tp, src=Pmax, dst=R)


@spmd.global_spmd(tp)
def vocab_log_softmax(logits: Tensor[S(-1)@tp]) -> Tensor[S(-1)@tp]:
    """``log_softmax(logits, -1)`` with the vocabulary split over tp, never gathering it.

    A pending max for the shift, a pending sum for the normaliser: both
    explicit, both resolved by one all-reduce of a ``[..., 1]`` tensor.
    """
    row_max: Tensor[R@tp] = spmd.all_reduce(
        spmd.amax(logits, -1, keepdim=True, out_partial_axes=tp), tp, src=Pmax, dst=R
    )
    shifted: Tensor[S(-1)@tp] = logits - row_max
    total: Tensor[R@tp] = spmd.all_reduce(
        spmd.sum(shifted.exp(), -1, keepdim=True, out_partial_axes=tp), tp, src=P, dst=R
    )
    return shifted - total.log()


REFERENCES: dict[str, Callable[..., torch.Tensor]] = {
    "row_parallel_linear": lambda x, w: x @ w.T,
    "column_parallel_linear": lambda x, w: x @ w.T,
    "mlp": lambda x, w1, w2: F.gelu(x @ w1.T) @ w2.T,
    "mlp_local_tail": lambda x, w1, w2: F.gelu(x @ w1.T) @ w2.T,
    "row_norms": lambda x: (x * x).sum(1).sqrt(),
    "batched_chain": lambda a, b, m: a @ b @ m,
    "contracted_einsum": lambda a, b: a @ b,
    "contracted_matmul": lambda a, b: a @ b,
    "vocab_max": lambda logits: logits.amax(-1),
    "vocab_log_softmax": lambda logits: torch.log_softmax(logits, -1),
}
"""Each program's meaning on one device, from the full (unsharded) tensors."""
