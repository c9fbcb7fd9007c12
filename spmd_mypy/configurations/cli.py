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

mypy's results are read structurally, never from text an output flag can
change: each configuration's run writes mypy's ``-O json``
(:mod:`.merge` reads and merges it), and mypy itself reads the output
settings given (command line and config file) before any run, so a
setting it would refuse stops ``spmd-check`` once, with mypy's message.
The merged report is written as mypy writes its own (:mod:`.report`):
text or ``-O json`` (with each diagnostic's ``"configurations"``), the
summary, colour, ``--junit-xml``.

Each configuration's end is shown as it comes: on a terminal a progress
line on stderr (``[2/3] sp: 4 errors (31 s)``), and what mypy wrote
besides diagnostics (its warnings, ``--verbose``'s log) once, as soon as a
configuration writes it.  The report itself waits for the last one: its
labels name every configuration a diagnostic occurs in.

Exit status: 0 clean, 1 if any configuration has an error, 2 if mypy
stopped (a blocking error, a bad setting: its exit status neither 0 nor 1)
in any, which stderr names as it happens (``spmd-check: mypy stopped in
configuration sp (exit status 2)``, or the terminal's progress line), or
if the config does not load the plugin (mypy would check nothing of the
SPMD types).
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from mypy.main import process_options
from mypy.options import Options

from spmd_mypy import config
from spmd_mypy.configurations import declared, merge
from spmd_mypy.configurations.report import Report
from spmd_mypy.versions import package_version

_STRUCTURED = ("--output=json", "--no-error-summary", "--no-color-output", "--no-pretty", "--junit-xml=")
"""Each configuration's run: mypy's JSON, nothing else on stdout, no report file of its own (the
empty ``--junit-xml`` outweighs the config file's); the merged report is written as the user asked."""
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
    mypy_options = _mypy_options(mypy_arguments)
    if isinstance(mypy_options, int):
        return mypy_options
    report = Report(mypy_options, [c.name for c in chosen])
    return _check_each(chosen, mypy_arguments, _cache_root(options.cache_dir, config_file), options.jobs, report)


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


def _mypy_options(mypy_arguments: list[str]) -> Options | int:
    """mypy's own reading of its arguments and config file; where mypy would stop on them, what it
    said, printed, and its exit status."""
    # what it says and still goes on (a warning about the config) every configuration's run says again
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        return process_options(mypy_arguments, stdout=stdout, stderr=stderr)[1]
    except SystemExit as stop:
        print(stdout.getvalue(), end="")
        print(stderr.getvalue(), end="", file=sys.stderr)
        return stop.code if isinstance(stop.code, int) else 2


@dataclass
class _Finished:
    """One configuration's mypy run, done."""

    name: str
    returncode: int
    output: merge.Output
    stderr: str
    seconds: float

    @property
    def stopped(self) -> bool:
        return self.returncode not in (0, 1)


def _check_each(configurations: list[declared.Configuration], mypy_arguments: list[str], root: Path,
                jobs: int, report: Report) -> int:
    started = time.monotonic()
    caches = {c.name: root / c.name for c in configurations}
    # any configuration's cache holds torch's analysis, and so does a plain run's (root.parent)
    others = sorted(path for path in root.iterdir() if path.is_dir()) if root.is_dir() else []
    sources = [*caches.values(), *others, root.parent]
    pending = list(configurations)
    first = None if any(_holds_cache(source) for source in sources) else pending[0]
    progress = _Progress([c.name for c in configurations], first.name if first else None)
    if first is not None:
        pending.pop(0)  # analyses torch once; the others start from its cache
        progress.show(_run(first, mypy_arguments, caches[first.name]))
    for configuration in pending:
        _seed(caches[configuration.name], sources)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for run in as_completed([pool.submit(_run, c, mypy_arguments, caches[c.name]) for c in pending]):
            progress.show(run.result())
    return _print([progress.finished[c.name] for c in configurations], report, time.monotonic() - started)


def _holds_cache(directory: Path) -> bool:
    """Whether mypy has written a cache here (a folder per Python version, ``3.11``)."""
    return directory.is_dir() and any(entry.name[:1].isdigit() for entry in directory.iterdir())


def _seed(cache: Path, sources: list[Path]) -> None:
    """A missing cache starts as a copy of an existing one (torch's analysis with it)."""
    source = next((other for other in sources if other != cache and _holds_cache(other)), None)
    if not _holds_cache(cache) and source is not None:
        shutil.copytree(source, cache, dirs_exist_ok=True, ignore=shutil.ignore_patterns(_FOLDER))


def _run(configuration: declared.Configuration, mypy_arguments: list[str], cache: Path) -> _Finished:
    # one process per configuration: mypy's own workers would parse modules where flags cannot be decided
    environment = {**os.environ, declared.ENVIRONMENT: configuration.name, "MYPY_NUM_WORKERS": "0"}
    command = [sys.executable, "-m", "mypy", *mypy_arguments, *_STRUCTURED, "--cache-dir", str(cache)]
    started = time.monotonic()
    done = subprocess.run(command, env=environment, capture_output=True, text=True)
    return _Finished(configuration.name, done.returncode, merge.read(done.stdout), done.stderr,
                     time.monotonic() - started)


class _Progress:
    """Each configuration's end, shown as it comes: a line on a terminal's stderr, and what mypy wrote
    besides diagnostics, each text once however many configurations write it."""

    def __init__(self, names: list[str], first: str | None) -> None:
        self.total = len(names)
        self.finished: dict[str, _Finished] = {}
        self.said: set[str] = set()
        self.terminal = sys.stderr.isatty()
        if self.terminal:
            alone = f"; {first} first, whose cache the others start from" if first else ""
            print(f"spmd-check: checking {', '.join(names)}{alone}", file=sys.stderr, flush=True)

    def show(self, run: _Finished) -> None:
        self.finished[run.name] = run
        if self.terminal:
            print(f"[{len(self.finished)}/{self.total}] {run.name}: {_outcome(run)} ({run.seconds:.0f} s)",
                  file=sys.stderr, flush=True)
        elif run.stopped:  # a terminal's line says so already
            print(f"spmd-check: mypy stopped in configuration {run.name} (exit status {run.returncode})",
                  file=sys.stderr, flush=True)
        self._once("".join(f"{line}\n" for line in run.output.other_lines), sys.stdout)
        self._once(run.stderr, sys.stderr)

    def _once(self, text: str, stream: TextIO) -> None:
        if text and text not in self.said:
            self.said.add(text)
            print(text, end="", file=stream, flush=True)


def _outcome(run: _Finished) -> str:
    if run.stopped:
        return f"mypy stopped (exit status {run.returncode})"
    errors = run.output.errors
    return f"{errors} error{'s' * (errors != 1)}" if errors else "no errors"


def _print(runs: list[_Finished], report: Report, seconds: float) -> int:
    merged = merge.merged({run.name: run.output for run in runs})
    by_file = report.by_file(merged)
    for lines in by_file.values():
        for line in lines:
            print(report.coloured(line))
    stopped = [run for run in runs if run.stopped]
    said = dict.fromkeys(line for run in stopped for line in [*run.output.other_lines, *run.stderr.splitlines()])
    report.write_junit_xml(seconds, by_file, list(said))
    if stopped:
        return 2
    errors = sum(diagnostic.severity == "error" for diagnostic, _ in merged)
    summary = report.summary(errors)
    if summary is not None:
        print(summary)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
