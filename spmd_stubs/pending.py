"""An operation in flight: :class:`Pending`, what ``async_op=True`` and ``isend``/``irecv`` return.

Overlap (docs/collectives.md#overlap) starts the communication, lets the
program compute meanwhile, and takes the result only when it needs it.
A :class:`Pending` is the in-flight state: it holds no tensor a program can
read, so the one way to the result is :meth:`Pending.wait`, which blocks
until the communication is done.  Reading the buffer of a collective still
in flight (garbage on a GPU, silently) cannot be written with it.
"""

from __future__ import annotations

from typing import Callable, Generic, Optional, Sequence, TypeVar

import torch.distributed as dist

__all__ = ["Pending"]

T = TypeVar("T")


class Pending(Generic[T]):
    """An operation in flight whose result, of type ``T``, :meth:`wait` gives.

    ``Pending(works, finish)``: ``works`` are the torch work handles the
    operation started (``dist.Work``), ``finish`` makes the result once they
    are done (and blocks on whatever torch keeps in flight itself: a
    functional collective's buffer).  :meth:`wait` runs it once and keeps its
    result: a second ``wait()`` returns the same object.  An error of the
    communication is raised by the ``wait()`` that meets it, and by every
    later one.

    An operation with nothing left in flight (one that completed at once: in
    the simulated world and under ``torch.compile``, where torch has no real
    async, or a call that needed its data at once) is :meth:`done`.
    """

    __slots__ = ("_works", "_finish", "_result", "_error", "_waited")

    def __init__(self, works: Sequence[dist.Work], finish: Callable[[], T]) -> None:
        self._works = tuple(works)
        self._finish: Optional[Callable[[], T]] = finish
        self._result: Optional[T] = None
        self._error: Optional[BaseException] = None
        self._waited = False

    @classmethod
    def done(cls, result: T) -> Pending[T]:
        """An operation already complete, whose :meth:`wait` returns ``result`` without blocking."""
        pending: Pending[T] = cls((), lambda: result)
        pending.wait()
        return pending

    def wait(self) -> T:
        """Block until the operation is done; its result (the same object on every call)."""
        if not self._waited:
            finish, self._finish = self._finish, None
            assert finish is not None
            try:
                for work in self._works:
                    work.wait()
                self._result = finish()
            except BaseException as error:
                self._error = error
                raise
            finally:
                self._waited, self._works = True, ()
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]  # T, set by finish (None where T is None)

    def is_completed(self) -> bool:
        """Whether :meth:`wait` would return without blocking on communication.

        True once waited, and for an operation that completed at once; else
        whether every torch work handle it holds reports completion.  An
        operation whose only handle torch keeps to itself (a functional
        collective's buffer, see docs/collectives.md#overlap) reports
        False until waited.
        """
        if self._waited:
            return True
        return bool(self._works) and all(work.is_completed() for work in self._works)

    def __repr__(self) -> str:
        return f"Pending({'completed' if self._waited else 'in flight'})"
