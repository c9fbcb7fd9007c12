"""Validation mode: each typed collective first checks that the ranks of its group agree.

The fast path compares nothing across ranks (that costs an exchange per
call); a mismatch then surfaces as whatever the backend does with it, which
on gloo can be an abort, a hang until the process-group timeout, or values
that are silently wrong (docs/robustness.md lists which).  In validation
mode every typed call first exchanges over its group, in one small
all_gather of one integer per rank, a digest of what each rank calls (the
collective, its src/dst, the shape and dtype of its ``x``); if they
disagree, every rank raises the same ``ValueError`` naming the ranks, what
each passed, and the fix.

On with ``SPMD_VALIDATE=1`` in the environment (read at import, like
``TORCH_DISTRIBUTED_DEBUG``) or :func:`set_validation`.
"""

from __future__ import annotations

import hashlib
import os
from typing import Optional

import torch
import torch.distributed as dist

from spmd_stubs._comm import functional
from spmd_stubs._kernels import Comm
from spmd_stubs.core import Step

active = os.environ.get("SPMD_VALIDATE", "0").strip() not in ("", "0")
"""Whether typed calls check agreement; read on every call, so a module attribute, not a function."""

Call = tuple[str, tuple[Optional[int], ...], str]
"""What one rank calls: the call as written, the shape of x (None where parts may differ), the dtype."""


def set_validation(enabled: bool) -> None:
    """Turn validation mode on or off for every later typed collective of this process."""
    global active
    active = enabled


def between_real_ranks(x: torch.Tensor) -> bool:
    """Whether ranks calling on ``x`` could disagree: not traced, and not simulated
    (one program runs every rank of the simulated world)."""
    return not functional(x)


def check_agreement(step: Step, comm: Comm, x: torch.Tensor) -> None:
    """Raise the same ``ValueError`` on every rank of ``comm``'s group if they call differently.

    One exchange of one integer per rank (a digest of the call) when they
    agree; only a disagreement pays for exchanging the calls themselves.
    """
    mine = _call_of(step, comm, x)
    digest = torch.tensor([_digest(mine)], dtype=torch.int64, device=x.device)
    digests = [torch.empty_like(digest) for _ in range(comm.size)]
    dist.all_gather(digests, digest, group=comm.group)
    if all(bool(d == digest) for d in digests):
        return
    calls: list[Optional[Call]] = [None] * comm.size
    dist.all_gather_object(calls, mine, group=comm.group)
    ranks = [dist.get_global_rank(comm.group, index) for index in range(comm.size)]
    said = "; ".join(f"rank {rank} calls {_shown(call)}" for rank, call in zip(ranks, calls))
    raise ValueError(
        f"{step.call(comm.axis)}: the {comm.size} ranks of axis {comm.axis}'s group disagree ({said}). "
        f"Fix: {_fix(calls)}."
    )


def _digest(call: Call) -> int:
    return int.from_bytes(hashlib.blake2b(repr(call).encode(), digest_size=7).digest(), "big")


def _call_of(step: Step, comm: Comm, x: torch.Tensor) -> Call:
    shape: tuple[Optional[int], ...] = tuple(x.shape)
    varying = step.src if step.src.shard is not None else step.dst
    if comm.split_sizes is not None and varying.shard is not None and x.dim():
        # Uneven parts differ along the split dim by design.
        dim = varying.shard % x.dim()
        shape = shape[:dim] + (None,) + shape[dim + 1 :]
    return step.call(comm.axis), shape, str(x.dtype).removeprefix("torch.")


def _shown(call: Optional[Call]) -> str:
    if call is None:
        return "nothing"
    text, shape, dtype = call
    dims = ", ".join("*" if size is None else str(size) for size in shape)
    return f"{text} with x of shape ({dims}) and dtype {dtype}"


def _fix(calls: list[Optional[Call]]) -> str:
    texts = {call[0] for call in calls if call is not None}
    dtypes = {call[2] for call in calls if call is not None}
    if len(texts) > 1:
        return (
            "every rank of a group must make the same typed collective calls in the same order; look for a "
            "branch on the rank, or on data that differs between ranks, around this call"
        )
    if len(dtypes) > 1:
        return "cast x to one dtype on every rank before the call, e.g. x.to(torch.float32)"
    return (
        "give x the same shape on every rank (torch.nn.functional.pad), or, for parts that differ along the "
        "split dim by design, pass split_sizes= with every rank's size"
    )
