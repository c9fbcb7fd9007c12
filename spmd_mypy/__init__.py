"""spmd_mypy: the mypy plugin that checks SPMD types, and the migration codemod.

Enable the checker with ``plugins = ["spmd_mypy"]`` in the mypy config.  The
plugin module is imported lazily so that ``spmd_mypy.migrate`` does not load
mypy.
"""

from typing import Any


def plugin(version: str) -> Any:
    """mypy's entry point: the plugin class for this mypy version."""
    from spmd_mypy.main import plugin as entry_point

    return entry_point(version)
