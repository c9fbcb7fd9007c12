"""Validation mode: each typed collective first checks that the ranks of its group agree.

The fast path compares nothing across ranks (that costs an exchange per
call); a mismatch then surfaces as whatever the backend does with it, which
on gloo can be an abort, a hang until the process-group timeout, or values
that are silently wrong (docs/robustness.md lists which).  In validation
mode every typed call first exchanges over its group, in one small
all_gather of one integer per rank, a digest of everything the ranks must
pass alike (:class:`Call`: the collective with its src/dst, all_reduce's
``op=``, ``split_sizes=``, the group's members as this rank's torch
recorded them, the shape and dtype of its ``x``); if they disagree, every
rank raises the same ``ValueError`` naming the ranks, what each passed, and
the fix.  An uneven all-to-all's row counts differ by rank by design: once
the calls agree, one more all_gather of every rank's counts checks that
each rank receives what the others send it (:func:`check_rows`).

On with ``SPMD_VALIDATE=1`` in the environment (read at import, like
``TORCH_DISTRIBUTED_DEBUG``) or :func:`set_validation`.
"""

from __future__ import annotations

import hashlib
import os
from typing import NamedTuple, Optional

import torch
import torch.distributed as dist

from spmd_stubs._collective_args import lost_peer
from spmd_stubs._comm import Rows, functional, registered
from spmd_stubs._kernels import Comm
from spmd_stubs.core import Step

active = os.environ.get("SPMD_VALIDATE", "0").strip() not in ("", "0")
"""Whether typed calls check agreement; read on every call, so a module attribute, not a function."""


class Call(NamedTuple):
    """What one rank calls: everything the ranks of the group must pass alike."""

    collective: str
    """The call with its src/dst: ``all_reduce(x, tp, src=P, dst=R)``."""
    op: Optional[str]
    """all_reduce's ``op=`` (``"sum"`` or ``"avg"``); None for the other operations."""
    split_sizes: Optional[tuple[int, ...]]
    members: Optional[tuple[int, ...]]
    """The group's global ranks in group order, as this rank's torch recorded them (None: a group
    torch never registered)."""
    shape: tuple[Optional[int], ...]
    """The shape of x; None where the parts may differ (the split dim, with ``split_sizes=``; dim 0 of an
    uneven all-to-all)."""
    dtype: str
    uneven: bool = False
    """An all-to-all given ``input_split_sizes=``/``output_split_sizes=`` (their values are checked after)."""


def set_validation(enabled: bool) -> None:
    """Turn validation mode on or off for every later typed collective of this process."""
    global active
    active = enabled


def between_real_ranks(x: torch.Tensor) -> bool:
    """Whether ranks calling on ``x`` could disagree: not traced, and not simulated
    (one program runs every rank of the simulated world)."""
    return not functional(x)


def check_agreement(
    step: Step, comm: Comm, x: torch.Tensor, op: Optional[str] = None, rows: Optional[Rows] = None
) -> None:
    """Raise the same ``ValueError`` on every rank of ``comm``'s group if they call differently.

    ``op``: all_reduce's ``op=`` as written; ``rows``: an uneven
    all-to-all's counts.  One exchange of one integer per rank (a digest of
    the call) when they agree, and for ``rows`` one of the counts
    (:func:`check_rows`); only a disagreement pays for exchanging the calls
    themselves.  A peer rank lost during the exchange is
    :func:`spmd_stubs._collective_args.lost_peer`'s error.
    """
    mine = _call_of(step, comm, x, op, rows is not None)
    digest = torch.tensor([_digest(mine)], dtype=torch.int64, device=x.device)
    digests = [torch.empty_like(digest) for _ in range(comm.size)]
    try:
        dist.all_gather(digests, digest, group=comm.group)
        if all(bool(d == digest) for d in digests):
            if rows is not None:
                check_rows(comm, x, rows)
            return
        # Each rank's own global rank: the ranks may disagree on the group's members.
        calls: list[Optional[tuple[int, Call]]] = [None] * comm.size
        dist.all_gather_object(calls, (dist.get_rank(), mine), group=comm.group)
    except RuntimeError as error:
        lost = lost_peer(mine.collective, comm.axis, error)
        if lost is None:
            raise
        raise lost from error
    ranked = [entry for entry in calls if entry is not None]
    differing = {field for field in Call._fields if len({getattr(call, field) for _, call in ranked}) > 1}
    if "collective" in differing:
        differing = {"collective"}  # the options of different collectives are not comparable
    said = "; ".join(f"rank {rank} calls {_shown(call, differing)}" for rank, call in ranked)
    raise ValueError(
        f"{_written(mine, differing)}: the {comm.size} ranks of axis {comm.axis}'s group disagree ({said}). "
        f"Fix: {_fix(differing)}."
    )


def _digest(call: Call) -> int:
    return int.from_bytes(hashlib.blake2b(repr(call).encode(), digest_size=7).digest(), "big")


def _call_of(step: Step, comm: Comm, x: torch.Tensor, op: Optional[str], uneven: bool) -> Call:
    shape: tuple[Optional[int], ...] = tuple(x.shape)
    varying = step.src if step.src.shard is not None else step.dst
    if comm.split_sizes is not None and varying.shard is not None and x.dim():
        # Uneven parts differ along the split dim by design.
        dim = varying.shard % x.dim()
        shape = shape[:dim] + (None,) + shape[dim + 1 :]
    if uneven and x.dim():
        shape = (None, *shape[1:])  # each rank sends its own number of rows
    dtype = str(x.dtype).removeprefix("torch.")
    return Call(step.call(comm.axis), op, comm.split_sizes, _members(comm), shape, dtype, uneven)


def _members(comm: Comm) -> Optional[tuple[int, ...]]:
    """The group's global ranks in group order, as this rank's torch recorded them (None: never registered)."""
    return tuple(dist.get_process_group_ranks(comm.group)) if registered(comm.group) else None


def check_rows(comm: Comm, x: torch.Tensor, rows: Rows) -> None:
    """Raise the same ``ValueError`` on every rank unless each rank ``j``'s ``output_split_sizes[i]`` is rank
    ``i``'s ``input_split_sizes[j]`` and each rank's x holds the rows it sends.

    Every rank's counts (and its number of rows) are gathered, so every rank
    sees every disagreement and names the same ranks and sizes.
    """
    n = comm.size
    held = x.shape[0] if x.dim() else -1
    mine = torch.tensor([*rows.input_split_sizes, *rows.output_split_sizes, held], dtype=torch.int64, device=x.device)
    gathered = [torch.empty_like(mine) for _ in range(n)]
    dist.all_gather(gathered, mine, group=comm.group)
    table: list[list[int]] = [t.tolist() for t in gathered]
    rank = list(_members(comm) or range(n))
    said = [
        f"rank {rank[i]} sends rank {rank[k]} {table[i][k]} rows (input_split_sizes[{k}] on rank {rank[i]}), but "
        f"rank {rank[k]} expects {table[k][n + i]} from it (output_split_sizes[{i}] on rank {rank[k]})"
        for i in range(n) for k in range(n) if table[i][k] != table[k][n + i]
    ]
    said += [
        f"rank {rank[i]} sends {sum(table[i][:n])} rows in all (its input_split_sizes={table[i][:n]}), but its x "
        f"{'has no dim 0' if table[i][2 * n] < 0 else f'holds {table[i][2 * n]} on dim 0'}"
        for i in range(n) if sum(table[i][:n]) != table[i][2 * n]
    ]
    if said:
        raise ValueError(
            f"all_to_all(x, {comm.axis}, src=V, dst=V) with input_split_sizes=/output_split_sizes=: the {n} ranks "
            f"of axis {comm.axis}'s group disagree on the rows they exchange ({'; '.join(said)}). Fix: give each "
            f"rank the output_split_sizes its peers' input_split_sizes imply, by exchanging the counts first: "
            f"output_split_sizes = all_to_all(torch.tensor(input_split_sizes), {comm.axis}, src=V, dst=V).tolist(); "
            f"and count input_split_sizes over x's own rows."
        )


def _written(call: Call, differing: set[str]) -> str:
    """The call as written, with its options: ``op=`` where it is "avg" or differs between the ranks."""
    options = f', op="{call.op}"' if call.op is not None and (call.op == "avg" or "op" in differing) else ""
    if call.split_sizes is not None:
        options += f", split_sizes={list(call.split_sizes)}"
    # The options go inside the call's closing parenthesis.
    return f"{call.collective[:-1]}{options})"


def _shown(call: Call, differing: set[str]) -> str:
    group = f" on the group of global ranks {list(call.members or ())}" if "members" in differing else ""
    dims = ", ".join("*" if size is None else str(size) for size in call.shape)
    return f"{_written(call, differing)}{group} with x of shape ({dims}) and dtype {call.dtype}"


def _fix(differing: set[str]) -> str:
    if "collective" in differing:
        return (
            "every rank of a group must make the same typed collective calls in the same order; look for a "
            "branch on the rank, or on data that differs between ranks, around this call"
        )
    if "members" in differing:
        return (
            "the ranks made this group from different lists of ranks, so each talks to other ranks than it "
            "believes; every rank must call dist.new_group (or build its DeviceMesh) with the same ranks in "
            "the same order, computed from the world size, never from its own rank"
        )
    if "op" in differing:
        return (
            'pass the same op= on every rank: op="avg" divides the sum by the group size, so ranks that '
            "differ end with different values of what should be one replicated tensor"
        )
    if "split_sizes" in differing:
        return (
            "pass the same split_sizes= on every rank: entry k is rank k's length along the split dim, so "
            "every rank needs every rank's length (gather the lengths first, e.g. dist.all_gather_object)"
        )
    if "dtype" in differing:
        return "cast x to one dtype on every rank before the call, e.g. x.to(torch.float32)"
    return (
        "give x the same shape on every rank (torch.nn.functional.pad), or, for parts that differ along the "
        "split dim by design, pass split_sizes= with every rank's size"
    )


# --------------------------------------------------------------------------
# Point-to-point: the two ends of every transfer agree
# --------------------------------------------------------------------------


class Transfer(NamedTuple):
    """One end of a point-to-point transfer, as this rank posts it (:mod:`spmd_stubs.p2p`)."""

    sends: bool
    """True: this rank sends ``shape``/``dtype``; False: it posts a receive of them."""
    peer: int
    """The other end's index on the axis."""
    shape: tuple[int, ...]
    dtype: torch.dtype


_DTYPES = (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64, torch.complex128,
    torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
)  # fmt: skip
"""The dtypes a transfer's header names by index (any other is -1, compared by the rest)."""

_HEADER_DIMS = 8
"""Dims a header lists; a tensor with more is compared by its number of dims, of elements and its first dims."""


_SENT, _POSTED = 1, 2
"""The tags of the headers a send and a receive send each other: a transfer's two ends pair as its data
does, by direction (the k-th send from a rank to a peer with the peer's k-th receive from it)."""


def _header(end: Transfer) -> list[int]:
    dtype = _DTYPES.index(end.dtype) if end.dtype in _DTYPES else -1
    numel = 1
    for size in end.shape:
        numel *= size
    dims = [*end.shape[:_HEADER_DIMS], *[-1] * (_HEADER_DIMS - len(end.shape))]
    return [dtype, len(end.shape), numel, *dims]


def _shape_and_dtype(header: list[int]) -> tuple[str, str]:
    """A header's shape and dtype as written in Python: ``(4, 5)``, ``torch.float32``."""
    ndim, dims = header[1], header[3 : 3 + min(header[1], _HEADER_DIMS)]
    shape = "(" + ", ".join(map(str, dims)) + ("," if ndim == 1 else "") + (", ..." if ndim > _HEADER_DIMS else "") + ")"
    return shape, str(_DTYPES[header[0]]) if header[0] >= 0 else "(a dtype validation does not name)"


def _described(header: list[int]) -> str:
    shape, dtype = _shape_and_dtype(header)
    return f"shape {shape} and dtype {dtype.removeprefix('torch.')}"


def check_transfers(what: str, axis: str, group: dist.ProcessGroup, ends: list[Transfer]) -> None:
    """Raise the same ``ValueError`` on both ends of any transfer in ``ends`` whose other end posts another
    shape or dtype.

    Each end sends the other a small header of what it posts (one message
    each way per transfer, all in one batch, before any data moves), so a
    mismatch is reported with both ranks and both shapes instead of
    hanging or reading garbage.  A peer that posts nothing (or also sends)
    is not detected: the headers wait for it until the process group's
    timeout, as the data would.  ``what`` is the call, for the message.
    """
    mine = [torch.tensor(_header(end), dtype=torch.int64) for end in ends]
    theirs = [torch.empty_like(header) for header in mine]
    ops = [
        dist.P2POp(dist.isend, header, group=group, group_peer=end.peer, tag=_SENT if end.sends else _POSTED)
        for header, end in zip(mine, ends)
    ]
    ops += [
        dist.P2POp(dist.irecv, header, group=group, group_peer=end.peer, tag=_POSTED if end.sends else _SENT)
        for header, end in zip(theirs, ends)
    ]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    me = dist.get_rank(group)
    for end, own, other in zip(ends, mine, theirs):
        if not torch.equal(own, other):
            ours, peers = (me, own.tolist()), (end.peer, other.tolist())
            raise ValueError(_mismatch(what, axis, group, *((ours, peers) if end.sends else (peers, ours))))


def _mismatch(what: str, axis: str, group: dist.ProcessGroup, sender: tuple[int, list[int]], receiver: tuple[int, list[int]]) -> str:
    """The message both ends of a mismatched transfer raise: the same text from either end."""
    (source, sent), (target, posted) = sender, receiver

    def rank(index: int) -> int:
        """The global rank of the axis's rank ``index``."""
        return dist.get_global_rank(group, index)

    return (
        f"{what} on axis {axis}: rank {rank(source)} (index {source} on {axis}) sends a tensor of "
        f"{_described(sent)} to rank {rank(target)} (index {target}), which posts a receive of "
        f"{_described(posted)}. Fix: receive on rank {rank(target)} what rank {rank(source)} sends, "
        f"recv({', '.join(_shape_and_dtype(sent))}, {axis}, rank={source}), or send it a tensor of the shape "
        f"and dtype it expects."
    )
