"""``spmd-migrate``: rewrite Megatron-style tensor-parallel code to typed collectives.

* Megatron-core's, Megatron-LM's and fairscale's mapping helpers
  (``reduce_from_tensor_model_parallel_region(x)``) become the typed call of
  the porting table (``spmd.all_reduce(x, tp, src=P, dst=I)``), see
  :mod:`spmd_stubs.core.megatron_table`.
* Raw ``torch.distributed`` collectives become ``x = spmd.<op>(...)`` where
  the intent is unambiguous, and get a ``# TODO(spmd-migrate): ...`` comment
  naming the open choice where it is not, see :mod:`.raw` and :mod:`.plans`.
* ``--overlay`` first applies SPMD annotations declared outside the source
  (third-party code), see :mod:`.overlay`.
* ``--infer`` writes the SPMD annotations the code lacks (parameters from
  their call sites, returns from their bodies, attributes from their
  assignments), from what mypy with the plugin infers, see :mod:`.infer`.

Formatting and comments are preserved (libcst), and a second run changes
nothing.  Usage: ``spmd-migrate --diff src/`` or ``python -m spmd_mypy.migrate``.
"""

from spmd_mypy.migrate.engine import Result, migrate_source

__all__ = ["Result", "migrate_source"]
