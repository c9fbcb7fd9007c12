"""Which mypy the plugin runs under, and the package's own version (the commands' ``--version``).

A mypy plugin uses mypy's internal API, which changes between releases.  The
plugin supports mypy 2.x from :data:`MYPY_OLDEST`: its case files pass under
every release from there up to :data:`MYPY_NEWEST_TESTED` (docs/checker.md,
"Supported versions").  A newer 2.x runs with a warning on stderr, so a mypy
release blocks no one; an older mypy, and mypy 3, stop mypy with one error on
stdout (:func:`refusing_plugin`), where the plugin would otherwise crash
inside mypy or mistype tensors.  This module imports nothing
from mypy until it has to report.
"""

from __future__ import annotations

import functools
import re
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy.options import Options
    from mypy.plugin import Plugin

__all__ = ["DISTRIBUTION", "MYPY_OLDEST", "MYPY_NEWEST_TESTED", "MYPY_BELOW", "MYPY_RANGE", "MYPY_TESTED_RANGE",
           "package_version", "mypy_minor", "mypy_supported", "mypy_tested", "unsupported_mypy", "untested_mypy",
           "require_mypy", "explain_import_failure", "installed_mypy", "refusing_plugin"]

DISTRIBUTION = "spmd-types-mypy"
MYPY_OLDEST = (2, 0)
"""The oldest mypy minor release the plugin supports (under 2.0 and 2.1 a method of a generic class, or a
type alias, can lose its SPMD types: docs/checker.md, "Supported versions")."""
MYPY_NEWEST_TESTED = (2, 4)
"""The newest mypy minor release the case files were run under (tests/install/test_versions.py)."""
MYPY_BELOW = (3, 0)
"""The first mypy release the plugin refuses: a major release may change the plugin API at will."""
MYPY_RANGE = f">={MYPY_OLDEST[0]}.{MYPY_OLDEST[1]},<{MYPY_BELOW[0]}.{MYPY_BELOW[1]}"
"""The requirement, as ``pyproject.toml``'s ``mypy`` extra writes it."""
MYPY_TESTED_RANGE = f">={MYPY_OLDEST[0]}.{MYPY_OLDEST[1]},<{MYPY_NEWEST_TESTED[0]}.{MYPY_NEWEST_TESTED[1] + 1}"
"""The tested releases, as the warning under a newer one tells the user to pin mypy."""


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
    >>> [mypy_supported(v) for v in ("2.4.1", "2.0.0", "2.5.0+dev.0123abcd", "2.13.0", "1.20.2", "3.0.0")]
    [True, True, True, True, False, False]
    """
    minor = mypy_minor(version)
    return minor is not None and MYPY_OLDEST <= minor < MYPY_BELOW


def mypy_tested(version: str) -> bool:
    """
    >>> [mypy_tested(v) for v in ("2.4.1", "2.0.0", "2.3.1", "2.5.0rc1", "1.20.2")]
    [True, True, True, False, False]
    """
    minor = mypy_minor(version)
    return minor is not None and MYPY_OLDEST <= minor <= MYPY_NEWEST_TESTED


def unsupported_mypy(version: str) -> str:
    """What to tell the user whose mypy is ``version``: which mypy this is, which one is needed, the fix."""
    return (
        f"this is mypy {version}; the spmd_mypy plugin ({DISTRIBUTION} {package_version()}) "
        f"supports mypy {MYPY_RANGE} only (mypy's plugin API changes between releases). "
        f"Fix: pip install 'mypy{MYPY_RANGE}' in this environment (or pip install '{DISTRIBUTION}[mypy]'); "
        f"an editor or pre-commit hook must run the mypy of the environment {DISTRIBUTION} is installed in."
    )


def untested_mypy(version: str) -> str:
    """The warning under a supported but untested mypy ``version``: it runs, and how to go back if it misbehaves."""
    newest = f"{MYPY_NEWEST_TESTED[0]}.{MYPY_NEWEST_TESTED[1]}"
    return (
        f"spmd_mypy: warning: this is mypy {version}, newer than the releases the spmd_mypy plugin "
        f"({DISTRIBUTION} {package_version()}) was tested with (mypy {newest} and older); mypy's plugin API "
        f"changes between minor releases. If the checker crashes or misreads a file, "
        f"pip install 'mypy{MYPY_TESTED_RANGE}', or a newer {DISTRIBUTION}."
    )


def require_mypy(version: str) -> None:
    """Stop mypy with one error on stdout unless ``version`` is supported; warn on stderr where it is untested.

    mypy calls ``spmd_mypy.plugin`` with its own version, and under an
    unsupported mypy that is :func:`refusing_plugin`, which reports the same
    error at the config file's ``plugins`` line: this error is for the real
    entry point called with a version other than the installed mypy's.
    """
    if not mypy_supported(version):
        from mypy.errors import CompileError

        raise CompileError([f"spmd_mypy: error: {unsupported_mypy(version)}"], use_stdout=True)
    if not mypy_tested(version):
        _warn_untested(version)


@functools.cache
def _warn_untested(version: str) -> None:
    """Once per process: mypy's daemon, and ``spmd-check`` per configuration, call the entry point again."""
    print(untested_mypy(version), file=sys.stderr)


def explain_import_failure(error: ImportError) -> str | None:
    """Why the plugin could not be imported, where mypy is the cause: not installed, or another release.

    mypy reports a plugin whose import raises as one error line on its
    config file (``Error importing plugin "spmd_mypy": ...``); ``None``
    when a tested mypy is installed, so the original error stands.
    """
    version = installed_mypy()
    if version is None:
        return (f"spmd_mypy needs mypy {MYPY_RANGE}, which is not installed. "
                f"Fix: pip install '{DISTRIBUTION}[mypy]' ({error})")
    if not mypy_supported(version):
        return f"{unsupported_mypy(version)} ({error})"
    return None if mypy_tested(version) else f"{untested_mypy(version)} ({error})"


def installed_mypy() -> str | None:
    """The version of the mypy that would load the plugin (``None``: mypy is not installed)."""
    try:
        from mypy.version import __version__
    except ImportError:
        return None
    return __version__


def refusing_plugin(version: str) -> type[Plugin]:
    """``spmd_mypy.plugin`` under an unsupported mypy: an entry point whose plugin only reports.

    mypy prints a :class:`~mypy.errors.CompileError` made with
    ``use_stdout=True`` on stdout, as it prints errors, and exits 2 (its
    daemon returns it as the run's output); the plugin's constructor raises
    one rather than the entry point because only the constructor is given
    mypy's options, whose config file the error line names, at its
    ``plugins`` line as mypy's own plugin errors do.  The plugin's own
    modules, written against another mypy's API, are not imported at all.
    """
    from mypy.errors import CompileError
    from mypy.plugin import Plugin

    class UnsupportedMypy(Plugin):
        def __init__(self, options: Options) -> None:
            # mypy loads plugins from a config file only; the plugin's name stands in for one all the same.
            where = _plugins_line(options.config_file) if options.config_file else "spmd_mypy"
            raise CompileError([f"{where}: error: {unsupported_mypy(version)}"], use_stdout=True)

    return UnsupportedMypy


def _plugins_line(config_file: str) -> str:
    """``path:line`` of the config file's ``plugins`` setting (line 1 where it cannot be told, as mypy does)."""
    section = "tool.mypy" if config_file.endswith(".toml") else "mypy"
    try:
        from mypy.build import find_config_file_line_number
    except ImportError:  # a mypy that moved it: the refusal must not fail on mypy's API itself
        line = -1
    else:
        line = find_config_file_line_number(config_file, section, "plugins")
    return f"{config_file}:{max(line, 1)}"
