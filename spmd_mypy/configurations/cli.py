"""``spmd-check``: mypy with the plugin, once per configuration, each diagnostic printed once.

::

    spmd-check [--configurations sp,no_sp] [--jobs N] [mypy's arguments] files...

Every argument it does not know is mypy's.  Each configuration keeps its
own incremental cache, ``<cache dir>/configurations/<name>``: a warm run of
N configurations costs N warm runs.  A configuration without a cache starts
from a copy of another one's, or of a plain mypy run's in the same cache
directory: the plugin leaves installed packages' cache entries independent
of the configuration, so torch is analysed once, and only the user's
modules are checked again.  Without configurations it is
one plain mypy run.

Exit status: 0 clean, 1 if any configuration has an error, 2 if mypy
stopped (a blocking error or a bad setting) in any, or if the config does
not load the plugin (mypy would check nothing of the SPMD types).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from spmd_mypy import config
from spmd_mypy.configurations import declared, merge
from spmd_mypy.versions import package_version

_NO_SUMMARY = ("--no-error-summary", "--no-color-output")
_FOLDER = "configurations"
"""The folder of mypy's cache directory that holds one cache per configuration."""


def main(argv: list[str] | None = None) -> int:
    options, mypy_arguments = _parser().parse_known_args(argv)
    try:
        config_file = options.config_file or config.find_config_file()
        settings = config.load(config_file)
    except config.ConfigError as error:
        print(f"spmd-check: {options.config_file or 'config'}: {error}", file=sys.stderr)
        return 2
    missing = config.plugin_missing(config_file)
    if missing is not None:
        print(f"spmd-check: error: {missing}", file=sys.stderr)
        return 2
    chosen = _chosen(settings.configurations, options.configurations)
    if isinstance(chosen, str):
        print(f"spmd-check: {chosen}", file=sys.stderr)
        return 2
    if config_file:
        mypy_arguments = ["--config-file", config_file, *mypy_arguments]
    if not chosen:
        cache = ["--cache-dir", options.cache_dir] if options.cache_dir else []
        return subprocess.run([sys.executable, "-m", "mypy", *mypy_arguments, *cache]).returncode
    return _check_each(chosen, mypy_arguments, _cache_root(options.cache_dir, config_file), options.jobs)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spmd-check", allow_abbrev=False,  # an abbreviation may be one of mypy's options
        description="Run mypy with the spmd_mypy plugin in every configuration "
        "([tool.spmd_mypy.configurations]) and print each diagnostic once, labelled with the configurations "
        "it occurs in. Other arguments are mypy's.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    parser.add_argument("--configurations", help="comma-separated names to check (default: all declared)")
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1,
                        help="configurations checked at once (default: the number of cores)")
    parser.add_argument("--config-file", help="mypy's config file (default: found as mypy finds it)")
    parser.add_argument("--cache-dir", help="mypy's cache directory; each configuration's is a folder in it")
    return parser


def _chosen(declared_ones: tuple[declared.Configuration, ...], names: str | None) -> list[declared.Configuration] | str:
    """The configurations to check, or what is wrong with ``--configurations``."""
    if names is None:
        return list(declared_ones)
    by_name = {c.name: c for c in declared_ones}
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in by_name]
    if unknown or not wanted:
        return (f"--configurations {names!r}: no configuration {', '.join(unknown) or 'named'}; "
                f"declared: {', '.join(by_name) or 'none (docs/checker.md#configurations)'}")
    return [by_name[name] for name in wanted]


def _cache_root(cache_dir: str | None, config_file: str | None) -> Path:
    """Where the configurations' caches live: in mypy's cache directory (``--cache-dir``, the config
    file's ``cache_dir``, ``$MYPY_CACHE_DIR``, else ``.mypy_cache``)."""
    chosen = cache_dir or config.mypy_setting(config_file, "cache_dir") or os.environ.get("MYPY_CACHE_DIR")
    return Path(chosen or ".mypy_cache") / _FOLDER


def _check_each(configurations: list[declared.Configuration], mypy_arguments: list[str], root: Path,
                jobs: int) -> int:
    caches = {c.name: root / c.name for c in configurations}
    # any configuration's cache holds torch's analysis, and so does a plain run's (root.parent)
    others = sorted(path for path in root.iterdir() if path.is_dir()) if root.is_dir() else []
    sources = [*caches.values(), *others, root.parent]
    outputs: dict[str, subprocess.CompletedProcess[str]] = {}
    pending = list(configurations)
    if not any(_holds_cache(source) for source in sources):
        first = pending.pop(0)  # analyses torch once; the others start from its cache
        outputs[first.name] = _run(first, mypy_arguments, caches[first.name])
    for configuration in pending:
        _seed(caches[configuration.name], sources)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        runs = {c.name: pool.submit(_run, c, mypy_arguments, caches[c.name]) for c in pending}
        outputs.update({name: run.result() for name, run in runs.items()})
    ordered = {c.name: outputs[c.name] for c in configurations}
    return _print(ordered)


def _holds_cache(directory: Path) -> bool:
    """Whether mypy has written a cache here (a folder per Python version, ``3.11``)."""
    return directory.is_dir() and any(entry.name[:1].isdigit() for entry in directory.iterdir())


def _seed(cache: Path, sources: list[Path]) -> None:
    """A missing cache starts as a copy of an existing one (torch's analysis with it)."""
    source = next((other for other in sources if other != cache and _holds_cache(other)), None)
    if not _holds_cache(cache) and source is not None:
        shutil.copytree(source, cache, dirs_exist_ok=True, ignore=shutil.ignore_patterns(_FOLDER))


def _run(configuration: declared.Configuration, mypy_arguments: list[str],
         cache: Path) -> subprocess.CompletedProcess[str]:
    # one process per configuration: mypy's own workers would parse modules where flags cannot be decided
    environment = {**os.environ, declared.ENVIRONMENT: configuration.name, "MYPY_NUM_WORKERS": "0"}
    command = [sys.executable, "-m", "mypy", *mypy_arguments, *_NO_SUMMARY, "--cache-dir", str(cache)]
    return subprocess.run(command, env=environment, capture_output=True, text=True)


def _print(runs: dict[str, subprocess.CompletedProcess[str]]) -> int:
    stopped = {name: run for name, run in runs.items() if run.returncode not in (0, 1)}
    for name, run in stopped.items():
        print(f"spmd-check: mypy stopped in configuration {name}:\n{run.stdout}{run.stderr}", file=sys.stderr)
    lines, errors = merge.report({name: run.stdout for name, run in runs.items()})
    for line in lines:
        print(line)
    for stderr in dict.fromkeys(run.stderr for name, run in runs.items() if name not in stopped and run.stderr):
        print(stderr, end="", file=sys.stderr)
    names = ", ".join(runs)
    if stopped:
        return 2
    if errors:
        print(f"Found {errors} error{'s' * (errors != 1)} in {len(runs)} configurations ({names})")
        return 1
    print(f"Success: no issues found in {len(runs)} configurations ({names})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
