"""Global SPMD per axis, one concern per module.

=================  ==========================================================
module             what
=================  ==========================================================
:mod:`.regions`    which axes are global in each def (one walk per module)
:mod:`.arguments`  the dims a call passes, read for shard propagation
:mod:`.refine`     an op's result refined on the global axes; ``spmd.*`` ops
:mod:`.boundaries` arguments and returned values against declared specs
=================  ==========================================================

Collectives in a global region keep only their shard forms
(:func:`spmd_stubs.core.sharding.global_collective`, called by
:mod:`spmd_mypy.transitions`).  The rules themselves are the core's
(docs/spec.md#global-spmd).
"""
