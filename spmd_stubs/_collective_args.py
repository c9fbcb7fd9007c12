"""The checks of :mod:`spmd_stubs.collectives`' arguments, and the errors a backend failure becomes.

What a call needs before it communicates: a group this rank is in
(:func:`check_member`, once per call site), a live process group
(every call, else :func:`no_process_group`: ``destroy_process_group()`` may
end it between two calls) and, for an average, a dtype that keeps it
(:func:`check_averageable`, every call).

Type validity is not checked here but in the core (:func:`spmd_stubs.core.transition`,
docs/spec.md#transitions); this module checks what the types do not say:
``split_sizes=``, the partition specs ``redistribute`` takes, and the shapes
the ranks pass (only after the fact: see :func:`backend_error`, which also
tells a peer rank that died or stopped answering from a mismatch).
An uneven all-to-all's ``input_split_sizes=``/``output_split_sizes=`` are
checked here for their form (:func:`checked_rows`) and against this rank's
rows (:func:`check_rows_sent`); that its src/dst are V is the algebra's
(:func:`spmd_stubs.core.comms.check_row_exchange`), and whether the ranks'
sizes match each other validation mode's (:mod:`spmd_stubs._validation`).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch
import torch.distributed as dist

from spmd_stubs._comm import Length, Rows
from spmd_stubs.core import AxisType, Step, TensorType, planner
from spmd_stubs.types import AxisAnnotation, axis_name


def checked_split_sizes(
    split_sizes: Optional[Sequence[int]], size: int, label: str, src: AxisType, dst: AxisType
) -> Optional[tuple[int, ...]]:
    """``split_sizes=`` as a tuple: one non-negative part length per rank of axis ``label``, for a shard."""
    if split_sizes is None:
        return None
    sizes = tuple(int(s) for s in split_sizes)
    if src.shard is None and dst.shard is None:
        raise ValueError(f"split_sizes needs a shard type S(i) as src or dst on axis {label}, not V")
    if len(sizes) != size or any(s < 0 for s in sizes):
        raise ValueError(
            f"split_sizes={list(sizes)} must give one non-negative size per rank of axis "
            f"{label} ({size} ranks)"
        )
    return sizes


def checked_rows(
    input_split_sizes: Optional[Sequence[Length]],
    output_split_sizes: Optional[Sequence[Length]],
    size: int,
    label: str,
    eager: bool,
) -> Rows:
    """An uneven all-to-all's sizes as :class:`Rows`: both given, one row count per rank of axis ``label``.

    ``eager`` (on real ranks): the counts are ints (from ``tolist()``);
    otherwise (simulated, traced) a count may be a ``SymInt``, different per
    rank.  Eager checks run in C where they can: a call's Python is what the
    raw call does not pay.  An eager call that goes straight to the group
    makes these checks and :func:`check_rows_sent`'s itself, on the counts as
    given (:meth:`spmd_stubs._dispatch._Site.exchange`); counts failing one
    come here for the error.
    """
    if input_split_sizes is None or output_split_sizes is None:
        given, missing = ("input", "output") if output_split_sizes is None else ("output", "input")
        raise ValueError(
            f"all_to_all(x, {label}, src=V, dst=V) got {given}_split_sizes= without {missing}_split_sizes=: an "
            f"uneven exchange needs both, what this rank sends each rank and what it receives from each. Fix: "
            f"pass both; output_split_sizes is what the ranks' input_split_sizes hold for this rank, e.g. "
            f"all_to_all(torch.tensor(input_split_sizes), {label}, src=V, dst=V).tolist()"
        )
    rows = Rows(list(input_split_sizes), list(output_split_sizes))  # copies: the backward runs after the caller's edits
    sent, received = rows
    if len(sent) != size or _negative(sent, eager):
        name, sizes = "input_split_sizes", sent
    elif len(received) != size or _negative(received, eager):
        name, sizes = "output_split_sizes", received
    else:
        return rows
    raise ValueError(
        f"all_to_all(x, {label}, src=V, dst=V) got {name}={sizes}, which must give one non-negative row count "
        f"per rank of axis {label} ({size} ranks)"
    )


def _negative(sizes: list[Length], eager: bool) -> bool:
    """Whether a count is negative; a ``SymInt`` (simulated, traced) is left to torch, since its
    comparison asks every rank to agree."""
    if eager:
        return min(sizes, default=0) < 0
    return any(isinstance(s, int) and s < 0 for s in sizes)


def check_rows_sent(x: torch.Tensor, rows: Rows, label: str) -> None:
    """``x``'s dim 0 holds the rows ``input_split_sizes`` sends, no more, no fewer."""
    sent = rows.input_split_sizes
    if x.dim() == 0 or x.shape[0] != sum(sent):
        rows_held = "no dim 0" if x.dim() == 0 else f"{x.shape[0]} rows"
        raise ValueError(
            f"all_to_all(x, {label}, src=V, dst=V) got input_split_sizes={list(sent)}, which send "
            f"{sum(sent)} rows of dim 0, but x has shape {tuple(x.shape)} ({rows_held}). Fix: count "
            f"input_split_sizes over x's own rows (entry k: the rows for rank k of {label}, in order), "
            f"e.g. torch.bincount(owner_of_each_row, minlength={len(sent)}).tolist() with x sorted by owner"
        )


_MISMATCH_FIX = {
    "all_reduce": "make the ranks' x the same shape before the call (the reduction is elementwise), "
    "e.g. pad the shorter ones with torch.nn.functional.pad",
    "all_gather": "make the ranks' parts the same shape, or for parts of different lengths along the "
    "shard dim pass split_sizes= (one length per rank) with src=S(i)",
    "reduce_scatter": "make the ranks' x the same shape before the call; pass split_sizes= with dst=S(i) "
    "to give the ranks parts of different lengths",
    "all_to_all": "make the ranks' x the same shape before the call; for rows of different counts pass "
    "src=V, dst=V with input_split_sizes= and output_split_sizes=, each rank's output_split_sizes[j] being "
    "rank j's input_split_sizes entry for it (SPMD_VALIDATE=1 compares them)",
}


_UNSUPPORTED_DTYPE = ("Invalid scalar type", "Unsupported dtype", "unsupported data type")
"""How backends say they cannot move a dtype (gloo: float8, uint16-64)."""
_NO_BATCHING_RULE = "Batching rule not implemented"
"""How ``torch.func.vmap`` refuses an op it cannot batch (every c10d collective)."""


_PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "Broken pipe", "remote process exited")
"""How backends say a peer rank's process is gone: gloo when it exited or was killed (its
socket closed or reset, or written to after), NCCL's "remote process exited or there was a
network error"."""
_PEER_SILENT = ("Timed out waiting", "Application timeout caused pair closure")
"""How gloo says a peer rank did not answer within the process group's timeout, and, on
every later call, that the group was closed for it."""


def _reason(error: RuntimeError) -> str:
    """The backend's own words: the first line of its error."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0].rstrip(".")


def lost_peer(call: str, axis: str, error: RuntimeError) -> Optional[RuntimeError]:
    """The error of ``call`` (as written) whose backend lost a peer rank of ``axis``'s group, or
    None if ``error`` says something else.

    A ``RuntimeError``, as the backend's is: no argument was wrong, and code
    that recovers from a lost rank catches that.
    """
    reason = _reason(error)
    if any(words in reason for words in _PEER_GONE):
        return RuntimeError(
            f"{call}: a peer rank of axis {axis}'s group exited or was killed, so the collective cannot complete "
            f"(the backend on this rank: {reason}). No later collective on this group can complete either. "
            f"Fix: find the peer's own error at the end of its log (an exception, a crash, an out-of-memory "
            f"kill) and fix that, then restart every rank (torchrun restarts them together with "
            f"--max-restarts). A peer that aborted inside this same call usually got a tensor of another shape "
            f"than this rank's: SPMD_VALIDATE=1 reports such a mismatch on every rank instead."
        )
    if any(words in reason for words in _PEER_SILENT):
        return RuntimeError(
            f"{call}: a peer rank of axis {axis}'s group did not answer within the process group's timeout "
            f"(the backend on this rank: {reason}): it exited or was killed, hangs, or waits in another "
            f"collective. The backend closed the group: no later collective on it can complete. Fix: find where "
            f"the peer ranks stopped (their logs; py-spy dump --pid for a live one) and fix that, then restart "
            f"every rank. Ranks making different collective calls are reported on every rank by SPMD_VALIDATE=1; "
            f"a peer that is only slow needs a longer init_process_group(timeout=...)."
        )
    return None


def backend_error(step: Step, axis: str, x: torch.Tensor, error: RuntimeError) -> Exception:
    """The backend's error in a collective, with the axis, the call, the local shape and the fix
    (a ``ValueError``), or, where the backend lost a peer rank, :func:`lost_peer`'s error."""
    lost = lost_peer(step.call(axis), axis, error)
    if lost is not None:
        return lost
    reason = _reason(error)
    if _NO_BATCHING_RULE in reason:
        return ValueError(
            f"{step.call(axis)} cannot run under torch.func.vmap: {reason}. vmap maps a function of one "
            f"sample, and a collective exchanges whole tensors between the ranks of axis {axis}, which has no "
            f"per-sample form. Fix: call the collective outside vmap, on the whole batch, and vmap only the "
            f"local computation."
        )
    if any(words in reason for words in _UNSUPPORTED_DTYPE):
        return ValueError(
            f"{step.call(axis)} failed in the communication backend on this rank: {reason}. The backend cannot "
            f"move or reduce dtype {x.dtype} (gloo has no float8 and no unsigned types beyond uint8). Fix: cast "
            f"x to a dtype the backend supports before the call and cast back after, e.g. "
            f"x.to(torch.bfloat16) for float8."
        )
    fix = _MISMATCH_FIX.get(step.op, f"make the ranks' x the same shape and dtype before {step.op}")
    return ValueError(
        f"{step.call(axis)} failed in the communication backend on this rank, whose x has shape "
        f"{tuple(x.shape)} and dtype {x.dtype}: {reason}. "
        f"The usual cause is ranks of axis {axis} passing tensors of different shapes or dtypes. "
        f"Fix: {fix}. TORCH_DISTRIBUTED_DEBUG=DETAIL makes torch compare the shapes before every "
        f"collective, so that every rank reports a mismatch instead of some of them crashing or hanging."
    )


# --------------------------------------------------------------------------
# redistribute between partition specs
# --------------------------------------------------------------------------


def is_spec(value: Any) -> bool:
    """A partition spec is a tuple/list of ``TYPE@axis`` (a flattened axis is a tuple of axes)."""
    return isinstance(value, (tuple, list)) and any(isinstance(item, AxisAnnotation) for item in value)


def spec_of(spec: Any, role: str, axes: dict[str, Any]) -> TensorType:
    """A written spec -> its TensorType; records each axis name's ``MeshAxis`` in ``axes``."""
    if not isinstance(spec, (tuple, list)):
        raise TypeError(
            f"redistribute's {role} spec must be a tuple of TYPE@axis entries such as (S(0)@(dp, tp), R@cp), "
            f"got {spec!r}"
        )
    entries: list[tuple[str, AxisType]] = []
    for annotation in spec:
        if not isinstance(annotation, AxisAnnotation):
            raise TypeError(
                f"redistribute's {role} spec takes TYPE@axis entries such as R@tp or S(0)@(dp, tp), "
                f"got {annotation!r}"
            )
        group = annotation.axis if isinstance(annotation.axis, tuple) else (annotation.axis,)
        axes.update((axis_name(a), a) for a in group)
        entries += annotation.entries()
    return planner.spec_of_entries(entries, role)


def check_member(group: dist.ProcessGroup, op: str, label: str) -> None:
    """``group=`` must be a group this rank is in: on any other, torch returns x unchanged."""
    if dist.get_rank(group) < 0:
        raise ValueError(
            f"{op}(x, {label}, ...) got group= a process group this rank (global rank {dist.get_rank()}) is not "
            f"in; a collective on it would return x unchanged. Fix: pass this rank's own group for {label}."
        )


def no_process_group(op: str, label: str) -> ValueError:
    """The error of a call once ``destroy_process_group()`` ended the cached groups (or before any)."""
    return ValueError(
        f"{op}(x, {label}, ...) runs with no process group: torch.distributed is not initialized, or "
        f"destroy_process_group() ended it. Fix: init_process_group(...) and bind the axes again "
        f"(spmd.bind_mesh / spmd.bind_groups)."
    )


def not_differentiable(op: str, step: Step, label: str, tangent: bool = False) -> ValueError:
    """The error of an in-place collective ``op`` (running ``step``) on a tensor autograd would
    differentiate through (``tangent``: one that carries a forward-mode tangent)."""
    types = f"x, {label}, src={step.src}, dst={step.dst}"
    if tangent:
        return ValueError(
            f"{op}({types}) reduces x in place, which cannot update the forward-mode tangent x carries. "
            f"Fix: y = {step.op}({types}) (out of place: its tangent crosses the ranks too), or run the "
            f"in-place form outside forward_ad.dual_level()."
        )
    return ValueError(
        f"{op}({types}) reduces x in place, which autograd cannot differentiate, and x requires a "
        f"gradient. Fix: y = {step.op}({types}) (out of place, differentiable), or run the "
        f"in-place form on a gradient (p.grad) or under torch.no_grad()."
    )


def no_forward_mode(step: Step, axis: str) -> ValueError:
    """The error of a forward-mode derivative (``torch.autograd.forward_ad``) through a pending max or min."""
    return ValueError(
        f"{step.call(axis)} has no forward-mode derivative here: a max or min over the ranks is not linear, "
        f"and its tangent would have to follow the rank attaining it. Fix: take this derivative in reverse "
        f"mode (loss.backward() or torch.autograd.grad), or reduce with src=P (a sum) where the math allows."
    )


def check_averageable(x: torch.Tensor, op: str, label: str) -> None:
    """An average of integers is no integer: refuse instead of changing the dtype."""
    if not (x.is_floating_point() or x.is_complex()):
        raise ValueError(
            f"{op}(x, {label}, ...) averages x of dtype {x.dtype}: the average of integers is not an integer, "
            f"so the result could not keep x's dtype. Fix: x.float() first, or reduce with op=\"sum\" and "
            f"divide as your integers need."
        )
