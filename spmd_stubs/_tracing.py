"""What the runtime does differently while dynamo traces it (``torch.compile``).

Dynamo is the tracer that reads this package's Python as code, guarding on
what it reads from a dict and unable to keep what the code builds.  The
others (non-strict export) run it as Python under a dispatch mode, where
caches are safe and :func:`spmd_stubs._comm.straight_to_group` declines, so
the kernels take the functional collectives.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import torch

_T = TypeVar("_T")

traced = torch.compiler.is_dynamo_compiling
"""Whether dynamo is tracing the caller: it folds this to a constant.  One Python call, where
``torch.compiler.is_compiling()`` makes two."""


def memoized(fn: Callable[..., _T]) -> Callable[..., _T]:
    """``fn`` cached for eager calls, traced as is under ``torch.compile``.

    For pure functions of hashable arguments.  Under compile the cost is paid
    once per trace anyway, and dynamo traces through a cache only with a warning.
    """
    cached = functools.lru_cache(maxsize=4096)(fn)

    @functools.wraps(fn)
    def call(*args: Any) -> _T:
        return fn(*args) if traced() else cached(*args)

    return call
