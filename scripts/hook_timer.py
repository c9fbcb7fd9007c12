"""One mypy run in this process: its CPU seconds, and the plugin's hooks' share, timed at their outermost call.

    python scripts/hook_timer.py [--plugin] MYPY_ARGS...   (e.g. --config-file mypy.ini --cache-dir .c -p benchpkg)

``--plugin``: the config loads ``spmd_mypy``, whose hooks are to be timed
(imported first; without it nothing of the plugin is imported, so a plain
run's process holds nothing more than plain mypy's).  Prints one JSON
object: ``import`` (CPU seconds importing the plugin after mypy's own
modules, done before the run), ``total`` (the run's CPU seconds) and
``hooks``, per kind of hook (the ``Plugin`` method mypy got it from,
``report_config_data`` and ``get_additional_deps`` being hooks themselves)
its calls and CPU seconds.  A hook that calls back into mypy (a signature hook inferring
an argument) is timed whole, so what mypy does inside it counts as the
hook's; a hook mypy calls from inside another counts once, in the
outermost.  Without ``--plugin``, ``hooks`` is empty and ``total`` is
plain mypy's.  ``scripts/bench_checker.py --breakdown`` runs it.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from typing import Any, Callable

_seconds: Counter[str] = Counter()
_calls: Counter[str] = Counter()
_inside = False


def _timed(kind: str, hook: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        global _inside
        if _inside:
            return hook(*args)
        _inside, start = True, time.process_time()
        try:
            return hook(*args)
        finally:
            _seconds[kind] += time.process_time() - start
            _calls[kind] += 1
            _inside = False

    return run


def _time_the_hooks(plugin: type) -> None:
    """Wrap every hook ``plugin`` hands mypy, and its two per-module methods."""
    for name in [n for n in vars(plugin) if n.startswith("get_") and n.endswith("_hook")]:
        lookup = getattr(plugin, name)

        def timed_lookup(self: Any, fullname: str, _lookup: Any = lookup, _kind: str = name) -> Any:
            hook = _lookup(self, fullname)
            return None if hook is None else _timed(_kind, hook)

        setattr(plugin, name, timed_lookup)
    for name in ("get_additional_deps", "report_config_data"):
        setattr(plugin, name, _timed(name, getattr(plugin, name)))


def main(argv: list[str]) -> int:
    from mypy import api, build, main  # noqa: F401  (mypy's own modules first: a plain run imports them too)

    imported = 0.0
    if argv[:1] == ["--plugin"]:
        argv = argv[1:]
        start = time.process_time()
        from spmd_mypy.main import SpmdPlugin

        imported = time.process_time() - start
        _time_the_hooks(SpmdPlugin)
    start = time.process_time()
    out, err, status = api.run(argv)
    total = time.process_time() - start
    if status != 0:
        sys.stderr.write(out + err)
        return status
    hooks = {kind: [_calls[kind], round(_seconds[kind], 4)] for kind in sorted(_seconds)}
    print(json.dumps({"import": round(imported, 4), "total": round(total, 4), "hooks": hooks}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
