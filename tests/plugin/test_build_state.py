"""The plugin keeps no state outside its build: what a build changes lives in the plugin's own object.

An in-process mypy build (the tools' :func:`spmd_mypy.typed_run.check`) runs
the whole checker; afterwards no module of ``spmd_mypy`` holds anything it
did not hold before, no plugin outlives its build, and the settings a tool
overrides reach mypy's parallel worker processes too.
"""

from __future__ import annotations

import gc
import importlib
import os
import pkgutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Callable

import pytest

import spmd_mypy
from spmd_mypy.main import SpmdPlugin
from spmd_mypy.typed_run import TypedRun, check
from tests.plugin.harness import ROOT, config_text

UNMODELLED = textwrap.dedent("""\
    from spmd_stubs import R, Tensor
    from spmd_stubs.axes import tp

    def f(x: Tensor[R@tp]) -> Tensor[R@tp]:
        return x.map_(x, max)
""")
"""A file whose one SPMD diagnostic is strict mode's (``map_`` is not modelled)."""


def _plugin_modules() -> list[types.ModuleType]:
    names = [info.name for info in pkgutil.walk_packages(spmd_mypy.__path__, "spmd_mypy.")
             if not info.name.endswith("__main__")]
    return [importlib.import_module(name) for name in names]


def _contents(value: object) -> object:
    """What a mutable container holds, by identity: a build that adds, drops or rebinds an item changes it."""
    if isinstance(value, dict):
        return {id(k): id(v) for k, v in value.items()}
    if isinstance(value, (list, set)):
        return sorted(map(id, value))
    return None


def _module_state() -> dict[str, object]:
    """Every module global of the plugin and every attribute of its classes that is not a function."""
    state: dict[str, object] = {}
    for module in _plugin_modules():
        for name, value in vars(module).items():
            state[f"{module.__name__}.{name}"] = (id(value), _contents(value))
            if isinstance(value, type) and value.__module__ == module.__name__:
                for attribute, held in vars(value).items():
                    if not callable(held) and not attribute.startswith("__"):
                        state[f"{module.__name__}.{name}.{attribute}"] = (id(held), _contents(held))
    return state


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, kept_dir: Callable[[str], Path]) -> tuple[Path, Path, Path]:
    """(a file with one strict-only diagnostic, the recommended config, a warm cache)."""
    folder = tmp_path_factory.mktemp("build_state")
    source = folder / "unmodelled.py"
    source.write_text(UNMODELLED)
    config = folder / "mypy.ini"
    config.write_text(config_text())
    return source, config, kept_dir("spmd_mypy") / "build_state_cache"


def _run(project: tuple[Path, Path, Path], **options: object) -> TypedRun:
    source, config, cache = project
    return check([source], config_file=config, cache_dir=cache, **options)  # type: ignore[arg-type]


def test_a_build_changes_no_module_state(project: tuple[Path, Path, Path]) -> None:
    _run(project)  # modules imported and their lazy tables built: what the first build may fill once
    before = _module_state()
    _run(project, strict=True)
    after = _module_state()
    changed = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    assert not changed, f"a build changed module-level state: {changed}"


def _plugins_alive() -> list[SpmdPlugin]:
    gc.collect()
    return [o for o in gc.get_objects() if isinstance(o, SpmdPlugin)]


def test_no_plugin_outlives_its_build(project: tuple[Path, Path, Path]) -> None:
    """This build's plugin is gone once the build is (others this process ran may be held by their tests)."""
    before = {id(plugin) for plugin in _plugins_alive()}
    _run(project)
    alive = [plugin for plugin in _plugins_alive() if id(plugin) not in before]
    assert not alive, f"{len(alive)} plugin(s) kept alive after their build"


def test_no_hook_lookup_is_cached_on_the_class() -> None:
    """A cache on a method (functools.lru_cache) holds every instance it saw: the plugin keeps answers itself."""
    cached = [name for name, value in vars(SpmdPlugin).items() if hasattr(value, "cache_info")]
    assert not cached


def test_strict_override_reaches_parallel_workers(project: tuple[Path, Path, Path]) -> None:
    """A tool's strict run keeps its diagnostics and type map with mypy's workers asked for."""
    source = project[0]
    run = _run(project, flags=["--num-workers=2"], strict=True)
    codes = [d.code for d in run.diagnostics if d.severity == "error"]
    assert codes == ["spmd-unmodelled"], run.diagnostics
    assert any(tree.path == str(source) for tree in run.trees.values())
    assert len(run.types) > 0


def test_a_flag_set_in_the_environment_reaches_every_worker(project: tuple[Path, Path, Path]) -> None:
    """``SPMD_MYPY_STRICT=true mypy -n 2``: every worker process checks strictly."""
    source, config, _ = project
    environment = {**os.environ, "SPMD_MYPY_STRICT": "true", "MYPY_FORCE_COLOR": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--no-incremental", "--num-workers=2",
         "--show-error-codes", str(source)], capture_output=True, text=True, cwd=ROOT, env=environment)
    assert "[spmd-unmodelled]" in done.stdout, done.stdout + done.stderr
    assert done.returncode == 1


def test_a_bad_flag_in_the_environment_is_named(project: tuple[Path, Path, Path]) -> None:
    source, config, _ = project
    environment = {**os.environ, "SPMD_MYPY_STRICT": "maybe"}
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(config), "--no-incremental",
                           str(source)], capture_output=True, text=True, cwd=ROOT, env=environment)
    assert "$SPMD_MYPY_STRICT must be true or false, got 'maybe'" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert done.returncode == 2
