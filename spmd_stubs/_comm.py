"""The communication primitives the kernels are made of.

Each runs as an in-place ``torch.distributed`` (c10d) call on a fresh output
buffer when it runs eagerly on a real process group, and as a functional
collective otherwise: under ``torch.compile``, which traces functional
collectives only, and in the single-process simulated world, where the
ranks' parts of a ``LocalTensor`` may differ in shape (``all_gather`` of 4
and 3 rows) and only ``LocalTensorMode``'s emulation of the functional
collectives gathers them (its emulation of the c10d calls takes one output
shape for every rank).  Functional collectives are about twice as slow as
c10d calls on gloo for mid-sized tensors (an extra copy and the
async-tensor wrapper), which is why eager code takes the c10d path; both
give the same values.

An eager c10d call goes straight to the process group's method (what
``dist.all_reduce`` and its siblings end in) with options made once, where
nothing else those functions do applies (:func:`straight_to_group`): no
tensor subclass or torch function mode to hand the call to, no complex
tensor to view as real, no ``_coalescing_manager`` block to queue the call
in; the group always has this rank (a mesh axis's, or one checked when its
call site was made).  That skips their Python (about 2 us a call), which
the raw code pays.  The ``group_*`` functions are those calls; an eager
call site of a typed collective calls them itself, past the layers above
(``spmd_stubs._kernels.direct_run``).
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, NamedTuple, TypeVar, Union, cast

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch._C._distributed_c10d import AllgatherOptions, AllreduceOptions, AllToAllOptions, ReduceScatterOptions
from torch.distributed._local_tensor import LocalTensor, enabled_local_tensor_mode

_Options = TypeVar("_Options", AllreduceOptions, ReduceScatterOptions, AllgatherOptions, AllToAllOptions)
_Reducing = TypeVar("_Reducing", AllreduceOptions, ReduceScatterOptions)

__all__ = [
    "REDUCE_OPS",
    "Rows",
    "exchange_rows",
    "left_in_flight",
    "received",
    "all_reduce_on",
    "all_reduce_into",
    "all_gather_on",
    "reduce_scatter_on",
    "all_to_all_rows",
    "registered",
    "never_registered",
    "straight_to_group",
    "group_all_reduce",
    "group_all_reduce_",
    "group_all_gather",
    "group_reduce_scatter",
    "group_all_to_all",
    "group_exchange_rows",
]

REDUCE_OPS = {
    name: dist.ReduceOp(op)
    for name, op in (("sum", dist.ReduceOp.SUM), ("max", dist.ReduceOp.MAX), ("min", dist.ReduceOp.MIN))
}
"""The reductions the kernels run (a pending avg is a sum divided by the group size).

``ReduceOp`` objects, made once: given the bare ``ReduceOp.SUM`` (an enum
value, also torch's default), c10d builds one on every call, about 0.5 us.
"""

_wait = cast(Callable[[torch.Tensor], torch.Tensor], funcol.wait_tensor)
"""``funcol.wait_tensor``, which torch leaves unannotated."""

_in_flight = False
"""Whether the calls made now are left in flight (:func:`left_in_flight`); read by :func:`functional`."""


@contextlib.contextmanager
def left_in_flight() -> Iterator[None]:
    """Inside, the primitives below take the functional collectives and do not wait for them.

    Each eager functional collective is started by torch asynchronously
    and returns an ``AsyncCollectiveTensor``: views of it stay in flight, and
    the first step that reads its data waits.  So a kernel run inside returns
    at once where its result is the collective's buffer or a view of it (the
    dim-0 and V layouts), and after the communication where it copies the
    data (a concatenation on another dim, uneven parts); :func:`received`
    gives the result either way.  For eager calls on real ranks only: the
    simulated world and traced code wait as before.
    """
    global _in_flight
    _in_flight = True
    try:
        yield
    finally:
        _in_flight = False


def received(t: torch.Tensor) -> torch.Tensor:
    """A kernel's result computed :func:`left_in_flight`, once its communication is done (blocks until then)."""
    return t.wait() if isinstance(t, funcol.AsyncCollectiveTensor) else t


def _done(t: torch.Tensor) -> torch.Tensor:
    """A functional collective's result, waited for unless the call is :func:`left_in_flight`."""
    return t if _in_flight else _wait(t)


def _blocking(options: _Options) -> _Options:
    """``options`` for a call that waits for its result, as ``torch.distributed``'s functions set them."""
    options.asyncOp = False
    return options


def _reducing(options: _Reducing, op: dist.ReduceOp) -> _Reducing:
    options.reduceOp = op
    return _blocking(options)


_ALL_REDUCE_OPTIONS = {name: _reducing(AllreduceOptions(), op) for name, op in REDUCE_OPS.items()}
_REDUCE_SCATTER_OPTIONS = {name: _reducing(ReduceScatterOptions(), op) for name, op in REDUCE_OPS.items()}
_ALL_GATHER_OPTIONS = _blocking(AllgatherOptions())
_ALL_TO_ALL_OPTIONS = _blocking(AllToAllOptions())
"""Options of the four calls (a reduction's per op), made once: the group copies them."""


_torch_world = getattr(dist.distributed_c10d, "_world", None)
"""torch's record of the process groups, read once here for the two dicts below."""

_COALESCING: dict[dist.ProcessGroup, list[object]] | None = getattr(_torch_world, "pg_coalesce_state", None)
"""torch's open ``_coalescing_manager`` blocks, group -> the calls queued in it (None where torch keeps them elsewhere).

Inside one, ``torch.distributed``'s functions queue a call to issue it with
the others at the block's end; a call straight to the group would run at
once, and on NCCL wait inside the group's coalescing for work not yet
launched.  The dict is torch's own, emptied and filled in place.
"""


_torch_groups: dict[dist.ProcessGroup, object] | None = getattr(_torch_world, "pg_map", None)
_REGISTERED: dict[dist.ProcessGroup, object] = {} if _torch_groups is None else _torch_groups
"""torch's live process groups, its ``_world.pg_map``: a dict it fills and empties in place
(where torch keeps them elsewhere, a dict that stays empty)."""


registered: Callable[[dist.ProcessGroup], bool] = _REGISTERED.__contains__
"""Whether torch has ``group`` registered: alive, as far as a call can tell cheaply.

``destroy_process_group()`` unregisters the groups it ends.  A group not
registered may still be alive (one torch never registered, or the world's
subgroup destroyed on its own): callers fall back to
``dist.is_initialized()``, three Python calls.  This is a C method, so an
eager call site asks it without a Python frame of its own.
"""


def never_registered(group: dist.ProcessGroup) -> bool:
    """:data:`registered` for code ``torch.compile`` traces, which must leave it to ``dist.is_initialized()``.

    Traced code must not read the registry: dynamo would guard on its
    contents, and every group made or destroyed later would recompile the
    function.
    """
    return False


_dispatch_modes: Callable[[], int] = torch._C._len_torch_dispatch_stack
_function_modes: Callable[[], int] = torch._C._len_torch_function_stack
"""The C checks of :func:`straight_to_group` (and the first, of :func:`functional`),
bound here: each call would otherwise look them up through ``torch._C``."""

_PLAIN_TENSORS = frozenset({torch.Tensor, torch.nn.Parameter})
"""The tensor types a call takes straight to the group.  Any subclass (a
``LocalTensor``, a ``DTensor``, one with its own ``__torch_function__``) is
left to ``torch.distributed``, which hands the call to it where it asks.
Looking at the type and at the torch function modes costs a cold call (a
rank that just woke from a collective) about 4 us less than asking torch
whether the tensor overrides torch functions and ``isinstance`` against the
subclass that does not (a scratch timing on this machine, each call after
a 64 MiB write)."""


def straight_to_group(x: torch.Tensor) -> bool:
    """Whether an eager call on ``x`` (and its output buffer, made like it) goes straight to the group.

    Only a plain tensor (:data:`_PLAIN_TENSORS`), not complex (which
    ``torch.distributed`` views as real).  Not under dynamo, which the
    callers rule out first.  With any mode active (a dispatch mode:
    ``LocalTensorMode``, a fake or debug mode; a torch function mode, as
    non-strict ``torch.export`` traces in) the call is left to
    ``torch.distributed`` or the functional collectives.
    """
    if _COALESCING is None or _COALESCING or _dispatch_modes() or _function_modes():
        return False
    return type(x) in _PLAIN_TENSORS and not x.is_complex()


def functional(x: torch.Tensor) -> bool:
    """Whether a call on ``x`` takes the functional collectives: left in flight, traced, or
    simulated (a ``LocalTensor``, or any tensor while a ``LocalTensorMode`` is active)."""
    if _in_flight or torch.compiler.is_compiling() or isinstance(x, LocalTensor):
        return True
    # A LocalTensorMode is a dispatch mode: with none on the stack (the usual
    # case) one C call answers, instead of torch's three Python calls.
    return bool(_dispatch_modes()) and enabled_local_tensor_mode() is not None


def all_reduce_on(x: torch.Tensor, group: dist.ProcessGroup, op: str = "sum") -> torch.Tensor:
    """The elementwise ``op`` (a key of :data:`REDUCE_OPS`) over the group, on every rank."""
    if functional(x):
        return _done(funcol.all_reduce(x.contiguous(), op, group))
    if straight_to_group(x):
        return group_all_reduce(group, op, x)
    out = x.clone(memory_format=torch.contiguous_format)
    dist.all_reduce(out, op=REDUCE_OPS[op], group=group)
    return out


def all_reduce_into(x: torch.Tensor, group: dist.ProcessGroup, op: str = "sum") -> torch.Tensor:
    """:func:`all_reduce_on`'s result written over ``x`` itself, which is returned.

    Eagerly on a contiguous ``x`` that is one in-place c10d call, with no
    buffer of its own; otherwise the out-of-place result copied back.
    """
    if functional(x):
        return x.copy_(all_reduce_on(x, group, op))
    if straight_to_group(x):
        return group_all_reduce_(group, op, x)
    if not x.is_contiguous():
        return x.copy_(all_reduce_on(x, group, op))
    dist.all_reduce(x, op=REDUCE_OPS[op], group=group)
    return x


def all_gather_on(x: torch.Tensor, dim: int, group: dist.ProcessGroup, size: int) -> torch.Tensor:
    """Every rank's ``x`` concatenated on ``dim``, in group rank order."""
    if functional(x):
        return _done(funcol.all_gather_single(x.contiguous(), dim, group))
    if straight_to_group(x):
        out = group_all_gather(group, size, x)
    else:
        x = x.contiguous()
        out = x.new_empty((size * x.size(0), *x.shape[1:]))
        dist.all_gather_single(out, x, group=group)
    return out if dim == 0 else torch.cat(out.chunk(size), dim)


def reduce_scatter_on(
    x: torch.Tensor, dim: int, group: dist.ProcessGroup, size: int, op: str = "sum"
) -> torch.Tensor:
    """Chunk ``k`` (on ``dim``) of the elementwise ``op`` over the group, on rank ``k``."""
    if functional(x):
        return _done(funcol.reduce_scatter_single(x.contiguous(), op, dim, group))
    rows = x if dim == 0 else torch.cat(x.chunk(size, dim))
    if straight_to_group(rows):
        return group_reduce_scatter(group, op, size, rows)
    rows = rows.contiguous()
    out = rows.new_empty((rows.size(0) // size, *rows.shape[1:]))
    dist.reduce_scatter_single(out, rows, op=REDUCE_OPS[op], group=group)
    return out


def all_to_all_rows(x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """Chunk ``j`` of dim 0 goes to rank ``j``; chunk ``j`` of the result came from rank ``j``."""
    if functional(x):
        return _done(funcol.all_to_all_single(x.contiguous(), None, None, group))
    if straight_to_group(x):
        return group_all_to_all(group, x)
    x = x.contiguous()
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x, group=group)
    return out


Length = Union[int, torch.SymInt]
"""A row count: an ``int``, or in the simulated world a ``SymInt`` whose value differs by rank."""


class Rows(NamedTuple):
    """The rows an uneven all-to-all exchanges, as this rank passes them.

    ``input_split_sizes[k]``: the rows of dim 0 this rank sends rank ``k`` (in
    order, so they sum to its dim 0); ``output_split_sizes[j]``: the rows it
    receives from rank ``j``, which must be rank ``j``'s ``input_split_sizes``
    entry for this rank.
    """

    input_split_sizes: list[Length]
    output_split_sizes: list[Length]

    def reversed(self) -> Rows:
        """The exchange that sends every row back where it came from: the backward's."""
        return Rows(self.output_split_sizes, self.input_split_sizes)


def exchange_rows(x: torch.Tensor, group: dist.ProcessGroup, rows: Rows) -> torch.Tensor:
    """Rows ``rows.input_split_sizes[k]`` of dim 0 go to rank ``k``; the result concatenates what each rank sent here."""
    if functional(x):
        return _done(funcol.all_to_all_single(x.contiguous(), rows.output_split_sizes, rows.input_split_sizes, group))  # type: ignore[arg-type]
    # Eager on real ranks: every length is an int (a SymInt comes of a simulated tensor only).
    received, sent = cast("list[int]", rows.output_split_sizes), cast("list[int]", rows.input_split_sizes)
    if straight_to_group(x):
        return group_exchange_rows(group, received, sent, x)
    x = x.contiguous()
    out = x.new_empty(sum(received), *x.shape[1:])
    dist.all_to_all_single(out, x, received, sent, group=group)
    return out


# --------------------------------------------------------------------------
# Straight to the group: eager calls where :func:`straight_to_group` holds
# --------------------------------------------------------------------------
# The group comes first, the tensor last, so that an eager call site binds
# the rest once (``functools.partial``) and calls these directly.  Each waits
# for its work itself, as torch's functions do (a backend that finished in
# C++ returns none): a shared helper would cost a Python call per collective.
# Shapes are read from ``x.shape`` (a getter), not ``x.size(0)``, whose
# argument parsing costs more on the cold core a waiting rank resumes on;
# an output's shape goes to ``new_empty`` as separate arguments, which is
# cheaper than building a tuple of them (1.9 -> 1.5 us on a warm core).


def group_all_reduce(group: dist.ProcessGroup, op: str, x: torch.Tensor) -> torch.Tensor:
    """:func:`all_reduce_on`, straight to the group."""
    out = x.clone(memory_format=torch.contiguous_format)
    work = group.allreduce([out], _ALL_REDUCE_OPTIONS[op])
    if work is not None:
        work.wait()
    return out


def group_all_reduce_(group: dist.ProcessGroup, op: str, x: torch.Tensor) -> torch.Tensor:
    """:func:`all_reduce_into`, straight to the group: in place where ``x`` is contiguous."""
    if not x.is_contiguous():
        return x.copy_(group_all_reduce(group, op, x))
    work = group.allreduce([x], _ALL_REDUCE_OPTIONS[op])
    if work is not None:
        work.wait()
    return x


def group_all_gather(group: dist.ProcessGroup, size: int, x: torch.Tensor) -> torch.Tensor:
    """:func:`all_gather_on` on dim 0, straight to the group."""
    x = x.contiguous()
    shape = x.shape
    out = x.new_empty(size * shape[0], *shape[1:])
    work = group.all_gather_single(out, x, _ALL_GATHER_OPTIONS)
    if work is not None:
        work.wait()
    return out


def group_reduce_scatter(group: dist.ProcessGroup, op: str, size: int, x: torch.Tensor) -> torch.Tensor:
    """:func:`reduce_scatter_on` on dim 0, straight to the group (dim 0 splits evenly)."""
    x = x.contiguous()
    shape = x.shape
    out = x.new_empty(shape[0] // size, *shape[1:])
    work = group.reduce_scatter_single(out, x, _REDUCE_SCATTER_OPTIONS[op])
    if work is not None:
        work.wait()
    return out


def group_all_to_all(group: dist.ProcessGroup, x: torch.Tensor) -> torch.Tensor:
    """:func:`all_to_all_rows`, straight to the group (dim 0 splits evenly)."""
    x = x.contiguous()
    out = torch.empty_like(x)
    work = group.all_to_all_single(out, x, [], [], _ALL_TO_ALL_OPTIONS)
    if work is not None:
        work.wait()
    return out


def group_exchange_rows(group: dist.ProcessGroup, received: list[int], sent: list[int], x: torch.Tensor) -> torch.Tensor:
    """:func:`exchange_rows`, straight to the group: ``sent[k]`` rows to rank ``k``, ``received[j]`` from rank ``j``."""
    x = x.contiguous()
    out = x.new_empty(sum(received), *x.shape[1:])
    work = group.all_to_all_single(out, x, received, sent, _ALL_TO_ALL_OPTIONS)
    if work is not None:
        work.wait()
    return out
