"""Which mypy the plugin runs under, and the package's own version (the commands' ``--version``).

A mypy plugin uses mypy's internal API, which changes between minor
releases: the plugin's case files pass under mypy 2.4 and fail under 2.0 to
2.3 and 1.x (docs/checker.md, "Supported versions").  :func:`require_mypy`
turns any other mypy into one error that says so, where the plugin would
otherwise crash inside mypy.  This module imports nothing from mypy until
it has to report.
"""

from __future__ import annotations

import re
from typing import NoReturn

__all__ = ["DISTRIBUTION", "MYPY_OLDEST", "MYPY_BELOW", "MYPY_RANGE", "package_version", "mypy_minor",
           "mypy_supported", "unsupported_mypy", "require_mypy", "explain_import_failure", "installed_mypy",
           "refusing_plugin"]

DISTRIBUTION = "spmd-types-mypy"
MYPY_OLDEST = (2, 4)
"""The oldest mypy minor release the plugin supports."""
MYPY_BELOW = (2, 5)
"""The first mypy minor release it does not (not yet tested)."""
MYPY_RANGE = f">={MYPY_OLDEST[0]}.{MYPY_OLDEST[1]},<{MYPY_BELOW[0]}.{MYPY_BELOW[1]}"
"""The requirement, as ``pyproject.toml``'s ``mypy`` extra writes it."""


def package_version() -> str:
    """The installed distribution's version (``0+unknown`` for a checkout that is only on ``sys.path``)."""
    from importlib import metadata  # here, not at the top: importing it costs every mypy run some 30 ms

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0+unknown"


def mypy_minor(version: str) -> tuple[int, int] | None:
    """A mypy version string's (major, minor), development builds included.

    >>> mypy_minor("2.4.1"), mypy_minor("2.5.0+dev.0123abcd"), mypy_minor("1.19.1"), mypy_minor("dev")
    ((2, 4), (2, 5), (1, 19), None)
    """
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match[1]), int(match[2])) if match else None


def mypy_supported(version: str) -> bool:
    """
    >>> [mypy_supported(v) for v in ("2.4.0", "2.4.1", "2.3.1", "2.5.0+dev.0123abcd", "1.19.1", "10.4")]
    [True, True, False, False, False, False]
    """
    minor = mypy_minor(version)
    return minor is not None and MYPY_OLDEST <= minor < MYPY_BELOW


def unsupported_mypy(version: str) -> str:
    """What to tell the user whose mypy is ``version``: which mypy this is, which one is needed, the fix."""
    return (
        f"spmd_mypy: error: this is mypy {version}; the spmd_mypy plugin ({DISTRIBUTION} {package_version()}) "
        f"supports mypy {MYPY_RANGE} only (mypy's plugin API changes between minor releases). "
        f"Fix: pip install 'mypy{MYPY_RANGE}' in this environment (or pip install '{DISTRIBUTION}[mypy]'); "
        f"an editor or pre-commit hook must run the mypy of the environment {DISTRIBUTION} is installed in."
    )


def require_mypy(version: str) -> None:
    """Stop mypy with one error, no traceback, unless ``version`` is supported.

    mypy reports a :class:`~mypy.errors.CompileError` raised by a plugin's
    entry point as its message alone (after one line naming the plugin) and
    exits 2; the daemon returns it as the run's error.  Any other exception
    there is mypy's INTERNAL ERROR.
    """
    if not mypy_supported(version):
        from mypy.errors import CompileError

        raise CompileError([unsupported_mypy(version)])


def explain_import_failure(error: ImportError) -> str | None:
    """Why the plugin could not be imported, where mypy is the cause: not installed, or another release.

    mypy reports a plugin whose import raises as one error line on its
    config file (``Error importing plugin "spmd_mypy": ...``); ``None``
    when the supported mypy is installed, so the original error stands.
    """
    version = installed_mypy()
    if version is None:
        return (f"spmd_mypy needs mypy {MYPY_RANGE}, which is not installed. "
                f"Fix: pip install '{DISTRIBUTION}[mypy]' ({error})")
    return None if mypy_supported(version) else f"{unsupported_mypy(version)} ({error})"


def installed_mypy() -> str | None:
    """The version of the mypy that would load the plugin (``None``: mypy is not installed)."""
    try:
        from mypy.version import __version__
    except ImportError:
        return None
    return __version__


def refusing_plugin(version: str) -> NoReturn:
    """``spmd_mypy.plugin`` under an unsupported mypy: an entry point that only reports.

    The plugin's own modules, written against another mypy's API, are not
    imported at all, so even a mypy whose API they cannot import gets the
    one error of :func:`require_mypy` rather than a failed import.
    """
    require_mypy(version)
    raise AssertionError(f"mypy {version} is supported: spmd_mypy.plugin is the real entry point")
