"""Shard propagation for global SPMD (docs/spec.md#global-spmd).

Pure Python (no torch, no mypy), like :mod:`spmd_stubs.core`: the mypy
plugin asks it, per global mesh axis, what an op's result is.

A *partition spec* says how the ranks' local tensors make up one global
tensor: ``S(i)@tp`` is one piece of the global tensor split on dim ``i`` over
``tp`` (with an ``order`` when several axes split that dim), and ``R``,
``I``, ``P`` are the global value itself (``P`` a pending reduction of it).
An op is *propagated* on an axis ``a`` when some partition spec ``out`` makes
``map(f, in_specs(x)) == out(f(x))`` hold: running the op locally on every
rank computes the op on the global tensors.  Where none exists, the local and
global meanings of the op differ, and the program needs a collective first:
the error names it.

:func:`propagate` answers for one axis.  Its inputs are each operand's type on
that axis (``None`` unknown, :data:`~spmd_stubs.core.SCALAR` a python
number) and the op's *shape behaviour* (:data:`Behaviour`: which dims the op
keeps, moves, reduces or acts along, with the dims of the call filled in).
Local typing runs first on every axis (:func:`spmd_stubs.core.evaluate`);
propagation only refines its V result into a shard ``S(d')`` with the same
order, turns a contraction into ``P`` where the call says
``out_partial_axes=``, or rejects the op.  Errors are
:class:`~spmd_stubs.core.SpmdTypeError` with the codes

* ``spmd-sharded-contraction``: the op contracts or reduces a dim that is
  sharded on the axis and the call does not name the axis in
  ``out_partial_axes`` (or names it where nothing sharded is contracted);
* ``spmd-shard-mismatch``: operands are split differently (or one has no
  partition spec), or the op acts along / reshapes the sharded dim.

**Unknown ndim.**  Types carry no shapes, so ``S(0)`` and ``S(-1)`` may be the
same dim.  Where an op's behaviour depends on the ndim (``sum(dim=-1)`` on
``S(0)``: the same dim when the tensor is 1-D), every ndim the op allows is
tried (a *reading*); the op is accepted only when all readings agree, and is
otherwise an error asking for dims written consistently (both counted from
the front, or both from the back).  So negative dims pass through ops that
keep trailing dims and non-negative ones through ops that keep leading dims.

Two assumptions are made, each documented in ``docs/global.md``:

* **Broadcasting.**  Elementwise operands align from the right.  An operand
  that is not sharded on the axis (R, I, P) is assumed to broadcast along the
  sharded dim (size 1 or missing there) and an operand that *is* sharded is
  assumed to have the result's ndim.  A full-size replicated operand fails
  torch's shape check at runtime (its size differs from the shard's), so that
  mistake is loud, not silent; the one silent case is a replicated operand
  with *more* dims than the sharded one and size 1 where they align: write
  the shard with a negative dim there (``S(-2)``).
* **Matrix transposes.**  ``.T`` and ``.t()`` are read as the 2-D transpose
  (torch deprecates ``.T`` on other ranks).

Readings under which the local program would fail torch's shape check
(a contracted or matched dim split on one operand and whole on another) are
dropped as *loud*: they cannot run silently.

=======================  ===================================================
module                   what
=======================  ===================================================
:mod:`.specs`            effective shard orders, spec comparisons and text
:mod:`.errors`           the errors and the fixes they name
:mod:`.readings`         one answer for every ndim an op allows
:mod:`.elementwise`      pointwise ops, ``cat``, ``stack``
:mod:`.dims`             reductions, ops along dims, dim moves, views
:mod:`.einsum`           einsum and the matmul family
:mod:`.propagate`        the entry point, :data:`Behaviour`
:mod:`.collectives`      collectives and casts on a global axis
=======================  ===================================================
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spmd_stubs.core.axis_types import Operand
    from spmd_stubs.core.sharding.collectives import global_collective
    from spmd_stubs.core.sharding.dims import (
        Along,
        Flatten,
        Movedim,
        Permute,
        Reduce,
        Squeeze,
        Transpose,
        Unsqueeze,
        View,
    )
    from spmd_stubs.core.sharding.einsum import MATMUL_FORMS, Attention, Einsum, Linear, Matmul
    from spmd_stubs.core.sharding.elementwise import Concat, Pointwise, Stack
    from spmd_stubs.core.sharding.errors import EINSUM_FORM, SpmdForm
    from spmd_stubs.core.sharding.propagate import Behaviour, Opaque, propagate
    from spmd_stubs.core.sharding.specs import effective, normalise_orders, same_spec, spec_mismatch, spec_text

# The names are bound on first use (module ``__getattr__``), not with the
# package: the plugin imports the package on every run (the op table names
# behaviours), building these modules' classes costs about a quarter of that
# import, and only global SPMD, ``spmd.*`` ops and global collectives use them.
_LAZY = {
    "Operand": "spmd_stubs.core.axis_types",
    "global_collective": "spmd_stubs.core.sharding.collectives",
    **dict.fromkeys(
        ("Along", "Flatten", "Movedim", "Permute", "Reduce", "Squeeze", "Transpose", "Unsqueeze", "View"),
        "spmd_stubs.core.sharding.dims",
    ),
    **dict.fromkeys(("MATMUL_FORMS", "Attention", "Einsum", "Linear", "Matmul"), "spmd_stubs.core.sharding.einsum"),
    **dict.fromkeys(("Concat", "Pointwise", "Stack"), "spmd_stubs.core.sharding.elementwise"),
    **dict.fromkeys(("EINSUM_FORM", "SpmdForm"), "spmd_stubs.core.sharding.errors"),
    **dict.fromkeys(("Behaviour", "Opaque", "propagate"), "spmd_stubs.core.sharding.propagate"),
    **dict.fromkeys(
        ("effective", "normalise_orders", "same_spec", "spec_mismatch", "spec_text"), "spmd_stubs.core.sharding.specs"
    ),
}

__all__ = [
    "Operand",
    "Pointwise",
    "Einsum",
    "Matmul",
    "MATMUL_FORMS",
    "Linear",
    "Attention",
    "Reduce",
    "Along",
    "Transpose",
    "Permute",
    "Movedim",
    "Concat",
    "Stack",
    "Unsqueeze",
    "Squeeze",
    "Flatten",
    "View",
    "Opaque",
    "Behaviour",
    "SpmdForm",
    "EINSUM_FORM",
    "propagate",
    "effective",
    "normalise_orders",
    "same_spec",
    "spec_text",
    "spec_mismatch",
    "global_collective",
]


def __getattr__(name: str) -> Any:
    """The first name asked for imports shard propagation and binds every name above, as an eager import would
    (``propagate`` the function, not its module, which the import system binds first)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    for each, module_name in _LAZY.items():
        globals()[each] = getattr(importlib.import_module(module_name), each)
    return globals()[name]
