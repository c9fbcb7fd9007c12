"""The SPMD coverage report (``spmd-coverage``): how much of a code base has known SPMD types, and where they die.

For the checked files of one strict run of mypy with the plugin
(:func:`spmd_mypy.typed_run.check`):

* the share of tensor-valued expressions whose SPMD type is known, overall,
  per module and per function (:mod:`.scopes` says which expressions count,
  :mod:`.figures` which are tensor-valued and known);
* every place where a typed value becomes unknown (the checker's own
  ``spmd-untyped-boundary`` and ``spmd-unmodelled`` diagnostics), sorted by
  how much typed flow each cuts off in its function (:mod:`.places`).

:mod:`.report` assembles both, :mod:`.cli` is the command.
"""

from spmd_mypy.coverage.report import Coverage, measure

__all__ = ["Coverage", "measure"]
