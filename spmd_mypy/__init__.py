"""spmd_mypy: the mypy plugin that checks SPMD types.

Enable the checker with ``plugins = ["spmd_mypy"]`` in the mypy config; mypy
calls :func:`plugin` with its version.  The codemod ``spmd-migrate`` lives in
:mod:`spmd_mypy.migrate`, which the plugin never imports.
"""

from spmd_mypy.main import plugin

__all__ = ["plugin"]
