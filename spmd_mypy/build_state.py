"""What the plugin remembers during one build: one object, owned by the plugin, forgotten in one place.

mypy asks plugins to hold no global state: one process may run several
builds (the tools' in-process runs, the test suite), and a daemon keeps one
build alive across edits.  Everything a hook keeps between calls lives in the
running plugin's :class:`BuildState`, which a hook reaches through the api
mypy hands it (:func:`state_of`).  A module parsed anew (a daemon edit) is
forgotten by :meth:`BuildState.forget`, the one place that knows every store.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mypy.nodes import MypyFile

from spmd_mypy.config import Config
from spmd_mypy.sources import SourceFiles

if TYPE_CHECKING:
    from spmd_mypy.global_mode.regions import Modes
    from spmd_mypy.representation import InternedValues


@dataclass
class BuildState:
    """The plugin's state for one build."""

    settings: Config
    """``[spmd_mypy]`` as this build reads it."""
    values: InternedValues
    """The hidden argument of each SPMD type, built once per build (:mod:`spmd_mypy.representation`)."""
    sources: SourceFiles = field(default_factory=SourceFiles)
    """The text of each parsed file, for annotations read back and messages that quote it."""
    modes: dict[str, Modes] = field(default_factory=dict)
    """Module name -> where its code is global SPMD (:mod:`spmd_mypy.global_mode.regions`)."""
    scheduled: set[int] = field(default_factory=set)
    """The modules (by id of their tree) whose wrapping waits for the end of their analysis."""
    quiet_lines: dict[str, set[int]] = field(default_factory=dict)
    """Module name -> its lines in ``with spmd.no_typecheck():`` blocks (:mod:`spmd_mypy.spmd_types_api.unchecked`)."""
    plan_sources: dict[str, tuple[int, ast.Module]] = field(default_factory=dict)
    """Path -> (its modification time, its parsed source): the module bodies plans are checked against
    (:mod:`spmd_mypy.plans`; mypy keeps none for a module loaded from its cache)."""
    plan_paths: set[str] = field(default_factory=set)
    """The paths of the modules that mention ``parallelize_module``: their plans are checked again every run."""
    layout_setters: set[tuple[str, int]] = field(default_factory=set)
    """(path, line) of each function whose attached layouts were checked (:mod:`spmd_mypy.layouts`)."""

    def forget(self, module: MypyFile) -> None:
        """``module`` was parsed anew: what was read from it before is stale."""
        self.sources.forget(module)
        self.modes.pop(module.fullname, None)
        self.quiet_lines.pop(module.fullname, None)
        self.layout_setters = {setter for setter in self.layout_setters if setter[0] != module.path}


def state_of(api: Any) -> BuildState:
    """The running plugin's state, from the api of any hook (checker, semantic or type analyser).

    Each of those holds the build's plugin: mypy's chain of the default
    plugin and the configured ones, of which the SPMD plugin owns the state.
    """
    chained = api.plugin
    for plugin in getattr(chained, "_plugins", (chained,)):
        state = getattr(plugin, "build_state", None)
        if isinstance(state, BuildState):
            return state
    raise LookupError("the spmd_mypy plugin is not among this build's plugins")
