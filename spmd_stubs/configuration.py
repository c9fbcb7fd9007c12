"""``spmd.flags``: the flags a type alias is chosen by, in each configuration the checker runs.

::

    Activation = Tensor[S[0, tp]] if spmd.flags.sequence_parallel else Tensor[I[tp]]

is, for the checker, ``Tensor[S[0, tp]]`` in a configuration that sets
``sequence_parallel = true`` and ``Tensor[I[tp]]`` in one that sets it false
(docs/checker.md#configurations).  At run time every SPMD type is
``torch.Tensor``, so the choice changes nothing: each flag reads ``False``.
Code that runs decides with its own flags (``self.sequence_parallel``),
never with these.
"""

from __future__ import annotations


class Flags:
    """Any attribute is a flag: ``False`` at run time, its configuration's value for the checker."""

    def __getattr__(self, name: str) -> bool:
        if name.startswith("__"):
            raise AttributeError(name)  # copy, pickle and friends probe dunders
        return False

    def __repr__(self) -> str:
        return "spmd.flags"


flags = Flags()
