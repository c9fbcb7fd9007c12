"""What a running mypy daemon compares to notice an edit of the plugin's settings.

``dmypy run`` restarts its daemon when a plugin changed: it compares each
plugin module's ``__version__`` (and file hash) with what it loaded at
start.  Inside the daemon, ``spmd_mypy.__version__`` carries a digest of the
config files in the folder mypy read its config from (mypy sets
``$MYPY_CONFIG_FILE_DIR`` as it reads one), so an edit of ``[spmd_mypy]``
restarts the daemon with the new settings instead of leaving it reporting
with the old ones.  Outside the daemon it is the package's version alone:
a changed plugin version invalidates every cached module, torch's included,
which a settings change in a plain run need not (the plugin's
``report_config_data`` invalidates the user's modules only).
"""

from __future__ import annotations

import hashlib
import os
import sys

from spmd_mypy.versions import package_version

_CONFIG_SUFFIXES = (".ini", ".cfg", ".toml")


def plugin_version() -> str:
    """The package's version; in mypy's daemon, with the digest of the config folder's settings files."""
    version = package_version()
    folder = os.environ.get("MYPY_CONFIG_FILE_DIR")
    if "mypy.dmypy_server" not in sys.modules or not folder or not os.path.isdir(folder):
        return version
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if (name.endswith(_CONFIG_SUFFIXES) or name == "config") and os.path.isfile(path):
            with open(path, "rb") as handle:
                digest.update(name.encode() + b"\0" + handle.read())
    return f"{version}+settings.{digest.hexdigest()}"
