"""spmd_mypy: the mypy plugin that checks SPMD types.

Enable the checker with ``plugins = ["spmd_mypy"]`` in the mypy config; mypy
calls :func:`plugin` with its version.  Under a mypy release outside the
supported range (:mod:`spmd_mypy.versions`), mypy stops with one error
naming the range and the fix.  The codemod ``spmd-migrate`` lives in
:mod:`spmd_mypy.migrate`, which the plugin never imports.

``plugin`` is imported on first use: the command-line tools under this
package (``spmd-check``, ``spmd-coverage``) start without loading mypy's
checker and the plugin's hooks.
"""

from typing import Any

from spmd_mypy.versions import explain_import_failure, installed_mypy, mypy_supported, refusing_plugin

__all__ = ["plugin"]


def __getattr__(name: str) -> Any:
    if name == "__version__":  # what mypy's daemon compares to notice a changed plugin
        from spmd_mypy.settings_digest import plugin_version

        return plugin_version()
    if name != "plugin":
        raise AttributeError(f"module 'spmd_mypy' has no attribute {name!r}")
    version = installed_mypy()
    if version is not None and not mypy_supported(version):
        return refusing_plugin  # mypy's hasattr() and call get one error, not a failed import of the hooks
    try:
        from spmd_mypy.main import plugin
    except ImportError as error:  # mypy missing, or a release whose API lacks what the plugin imports
        explained = explain_import_failure(error)
        if explained is None:
            raise
        raise ImportError(explained) from error
    return plugin
