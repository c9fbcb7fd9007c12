"""The four communication primitives the kernels are made of.

Each runs as an in-place ``torch.distributed`` (c10d) call on a fresh output
buffer when it runs eagerly, on a real process group or in the
single-process simulated world (``LocalTensorMode`` emulates the c10d ops
as it does the functional ones), and as a functional collective under
``torch.compile``, which traces functional collectives only.  Functional
collectives are about twice as slow as c10d calls on gloo for mid-sized
tensors (an extra copy and the async-tensor wrapper) and four times as
slow in the simulated world on small ones, which is why eager code takes
the c10d path; both give the same values.
"""

from __future__ import annotations

from typing import Callable, cast

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

__all__ = ["REDUCE_OPS", "all_reduce_on", "all_gather_on", "reduce_scatter_on", "all_to_all_rows"]

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


traced: Callable[[], bool] = torch.compiler.is_compiling
"""Whether ``torch.compile`` is tracing the call (it traces functional collectives only).

Torch's function itself, asked on every call: a wrapper would be one more
Python call per collective.
"""


def all_reduce_on(x: torch.Tensor, group: dist.ProcessGroup, op: str = "sum") -> torch.Tensor:
    """The elementwise ``op`` (a key of :data:`REDUCE_OPS`) over the group, on every rank."""
    if traced():
        return _wait(funcol.all_reduce(x.contiguous(), op, group))
    out = x.clone(memory_format=torch.contiguous_format)
    dist.all_reduce(out, op=REDUCE_OPS[op], group=group)
    return out


def all_gather_on(x: torch.Tensor, dim: int, group: dist.ProcessGroup, size: int) -> torch.Tensor:
    """Every rank's ``x`` concatenated on ``dim``, in group rank order."""
    if traced():
        return _wait(funcol.all_gather_single(x.contiguous(), dim, group))
    x = x.contiguous()
    out = x.new_empty((size * x.size(0), *x.shape[1:]))
    dist.all_gather_single(out, x, group=group)
    return out if dim == 0 else torch.cat(out.chunk(size), dim)


def reduce_scatter_on(
    x: torch.Tensor, dim: int, group: dist.ProcessGroup, size: int, op: str = "sum"
) -> torch.Tensor:
    """Chunk ``k`` (on ``dim``) of the elementwise ``op`` over the group, on rank ``k``."""
    if traced():
        return _wait(funcol.reduce_scatter_single(x.contiguous(), op, dim, group))
    rows = x.contiguous() if dim == 0 else torch.cat(x.chunk(size, dim))
    out = rows.new_empty((rows.size(0) // size, *rows.shape[1:]))
    dist.reduce_scatter_single(out, rows, op=REDUCE_OPS[op], group=group)
    return out


def all_to_all_rows(x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """Chunk ``j`` of dim 0 goes to rank ``j``; chunk ``j`` of the result came from rank ``j``."""
    if traced():
        return _wait(funcol.all_to_all_single(x.contiguous(), None, None, group))
    x = x.contiguous()
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x, group=group)
    return out
