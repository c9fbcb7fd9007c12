"""The commands' entry points: each checks that its extra is installed before it imports anything of it.

``pip install spmd-types-mypy`` installs the runtime alone (torch, no mypy,
no libcst) and, as every wheel does, the command scripts too.  Run from
there, a command says which extra it needs and exits with status 2, instead
of a ``ModuleNotFoundError`` traceback (or, for ``spmd-check``, exit status
1, its code for "errors found").
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence

from spmd_mypy.versions import DISTRIBUTION

_NEEDS = {
    "spmd-check": ("mypy", ("mypy",), "spmd_mypy.configurations.cli"),
    "spmd-coverage": ("mypy", ("mypy",), "spmd_mypy.coverage.cli"),
    "spmd-migrate": ("migrate", ("libcst", "mypy"), "spmd_mypy.migrate.cli"),
}
"""command -> (its extra, the modules the extra installs that it imports, the module of its ``main``)."""


def missing_extra(command: str) -> str | None:
    """What to tell the user where ``command``'s extra is not installed, None where it is."""
    extra, modules, _ = _NEEDS[command]
    absent = [module for module in modules if importlib.util.find_spec(module) is None]
    if not absent:
        return None
    return (f"{command}: error: {' and '.join(absent)} not installed: {command} needs the '{extra}' extra. "
            f"Fix: pip install '{DISTRIBUTION}[{extra}]'")


def _entry(command: str) -> Callable[[Sequence[str] | None], int]:
    def main(argv: Sequence[str] | None = None) -> int:
        said = missing_extra(command)
        if said is not None:
            print(said, file=sys.stderr)
            return 2
        run: Callable[[Sequence[str] | None], int] = importlib.import_module(_NEEDS[command][2]).main
        return run(argv)

    main.__doc__ = f"``{command}``: :func:`{_NEEDS[command][2]}.main` once its extra is found installed."
    return main


check = _entry("spmd-check")
coverage = _entry("spmd-coverage")
migrate = _entry("spmd-migrate")
