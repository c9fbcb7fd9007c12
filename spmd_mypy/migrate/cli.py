"""The ``spmd-migrate`` command line.

    spmd-migrate [--diff | --check | --in-place | --output-dir DIR] [--overlay FILE|NAME ...]
                 [--replicated-dst R|I] [--config-file FILE] [-j N] PATH ...
    spmd-migrate --infer [--diff | --check | --in-place | --output-dir DIR | --write-overlay FILE]
                 [--config-file FILE] [--cache-dir DIR] PATH ...

PATHs are files or directories (searched for ``*.py``).  Without a mode the
command only prints a diff (``a/`` and ``b/`` prefixes, as ``git apply``
takes it) on stdout: nothing is written unless asked.  The list of sites,
progress and the summary go to stderr.  ``--check`` prints the same diff and
exits 1 when a file would change, 0 when none would.  Files are migrated
in ``-j N`` worker processes (default: one per core); a file that cannot
be migrated (it does not parse, its overlay entries went stale) is named
with the line and the reason, the others are migrated all the same, and the
exit status is 2.  With ``--output-dir`` every PATH is copied under DIR,
keeping its path below the directory the PATHs' packages share (so
``spmd-migrate --output-dir out site-packages/fairscale`` writes
``out/fairscale/...``, and ``out src/pkg/a.py`` writes ``out/pkg/a.py``), and
the copies are migrated; the originals are never touched.  Module names
(for relative imports and overlays) come from the path below a ``--root``
(needed for namespace packages such as ``megatron``), else from the
``__init__.py`` files around each original.
The mesh axis of a ``group=`` comes from the checker's ``[spmd_mypy] groups``
declaration in ``--config-file``, or in the config file mypy would find
from the current directory; the codemod's name guesses fill in the rest.

``--infer`` instead writes the SPMD annotations the code lacks, from what
mypy with the plugin infers (:mod:`.infer`), into the sources or, with
``--write-overlay``, into an overlay file for code the user does not own.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from spmd_mypy import config
from spmd_mypy.migrate.batch import Failure, Job, Options, Progress, default_jobs, transformed
from spmd_mypy.migrate.files import output_base, rewrite_source, unified_diff
from spmd_mypy.migrate.overlay import OverlayError, load_overlays
from spmd_mypy.migrate.transformer import Report
from spmd_mypy.versions import package_version

if TYPE_CHECKING:
    from spmd_mypy.migrate.infer import Inference

__all__ = ["main"]


def _python_files(path: Path) -> list[Path]:
    return sorted(path.rglob("*.py")) if path.is_dir() else [path]


def _copied(path: Path, output_dir: Path, base: Path) -> Path:
    """Where ``--output-dir`` puts the copy of ``path``: its path below ``base``, under ``output_dir``."""
    return output_dir / Path(os.path.abspath(path)).relative_to(base)


def _jobs(args: argparse.Namespace) -> list[Job]:
    """Every Python file of the PATHs, and where its migrated text goes (itself, or its copy)."""
    files = [file for path in args.paths for file in _python_files(path)]
    if args.output_dir is None:
        return [Job(file, file) for file in files]
    base = output_base(args.paths, args.root)
    return [Job(file, _copied(file, args.output_dir, base)) for file in files]


def _copy_tree(args: argparse.Namespace) -> None:
    """Copy every PATH whole (data files and all) under ``--output-dir``, so a copied package still imports."""
    base = output_base(args.paths, args.root)
    for path in args.paths:
        copy = _copied(path, args.output_dir, base)
        if path.is_dir():
            shutil.copytree(path, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, copy)


def _group_declarations(config_file: Path | None) -> config.AxisNames:
    """``[spmd_mypy] groups`` of the config file given, else of the one mypy would read here."""
    if config_file is not None and not config_file.is_file():
        raise config.ConfigError(f"no such config file: {config_file}")
    found = str(config_file) if config_file is not None else config.find_config_file()
    return config.load(found).groups


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spmd-migrate",
        description="Rewrite Megatron/fairscale mapping helpers and torch.distributed collectives "
        "to typed spmd_stubs collectives.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    parser.add_argument("paths", nargs="+", type=Path, help="files or directories")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--diff", action="store_true", help="print a unified diff (the default)")
    mode.add_argument("--in-place", action="store_true", help="rewrite the files")
    mode.add_argument("--output-dir", type=Path, help="copy the paths under DIR and rewrite the copies")
    mode.add_argument("--check", action="store_true",
                      help="write nothing; print the diff and exit 1 if anything would change, 0 if nothing "
                      "would (for CI and pre-commit)")
    parser.add_argument("--overlay", type=Path, action="append", default=[],
                        help="a TOML file of SPMD annotations to apply first, or a shipped overlay's name "
                        "(fairscale, megatron-core) (repeatable)")
    parser.add_argument("--replicated-dst", choices=("R", "I"),
                        help="dst for raw all_reduce/all_gather results (otherwise a TODO)")
    parser.add_argument("--root", type=Path, action="append", default=[],
                        help="a directory imports start from (like site-packages); needed to name "
                        "modules of namespace packages such as megatron (repeatable)")
    parser.add_argument("--config-file", type=Path,
                        help="the mypy config file whose [spmd_mypy] groups name the axes of process groups "
                        "(default: the one mypy would find from the current directory)")
    parser.add_argument("--quiet", action="store_true", help="print only the summary (no site list, no progress)")
    parser.add_argument("-j", "--jobs", type=int, default=default_jobs(), metavar="N",
                        help="migrate files in N worker processes (default: the number of cores)")
    parser.add_argument("--infer", action="store_true",
                        help="write the SPMD annotations the code lacks, inferred by the checker "
                        "(parameters from call sites, returns from bodies, attributes from assignments)")
    mode.add_argument("--write-overlay", type=Path, metavar="FILE",
                      help="with --infer: write the inferred annotations to an overlay file, not the sources")
    parser.add_argument("--cache-dir", type=Path, help="with --infer: mypy's cache directory")
    return parser


def _infer(args: argparse.Namespace) -> int:
    """``--infer``: check, write what the checker knows, check again, until nothing changes."""
    from mypy.errors import CompileError  # mypy and the plugin load only for --infer

    from spmd_mypy.migrate.infer import infer, overlay_toml

    config_file = args.config_file
    if config_file is None:
        found = config.find_config_file()
        config_file = Path(found) if found else None
    try:
        result = infer(args.paths, config_file, args.cache_dir)
    except CompileError as err:
        print("spmd-migrate --infer: mypy stopped:\n" + "\n".join(err.messages), file=sys.stderr)
        return 2
    if not args.quiet:
        _print_inference(result)
    changed = [path for path in result.texts if result.texts[path] != result.originals[path]]
    if args.write_overlay is not None:
        args.write_overlay.write_text(overlay_toml(result.overlays()))
        changed = []
    elif args.output_dir is not None:
        _copy_tree(args)
        for job in _jobs(args):
            if job.source.resolve() in changed:
                rewrite_source(job.destination, result.texts[job.source.resolve()])
    elif args.in_place:
        for path in changed:
            rewrite_source(path, result.texts[path])
    else:
        for path in changed:
            _print_diff(result.originals[path], result.texts[path], path)
    print(f"spmd-migrate --infer: {result.count('parameter')} parameters, {result.count('return')} returns, "
          f"{result.count('attribute')} attributes inferred, {len(result.todos)} TODOs, "
          f"{len(changed)} files changed ({result.runs} mypy runs)", file=sys.stderr)
    return _check_status(args, len(changed))


def _shown_path(path: Path) -> Path:
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path


def _print_diff(original: str, code: str, path: Path) -> None:
    """A unified diff with git's ``a/`` and ``b/`` prefixes, so ``git apply`` (or ``patch -p1``) takes it.

    Paths are relative to the current directory; one outside it is written
    from the root (``a/tmp/x.py``: ``patch -p1`` applies it from ``/``).
    """
    sys.stdout.writelines(unified_diff(original, code, _shown_path(path).as_posix().lstrip("/")))
    sys.stdout.flush()


def _check_status(args: argparse.Namespace, changed: int) -> int:
    """0, or with ``--check`` 1 when a file would change (saying how to change it)."""
    if not args.check or changed == 0:
        return 0
    print(f"spmd-migrate --check: {changed} files would change; the same command with --in-place instead of "
          f"--check rewrites them", file=sys.stderr)
    return 1


def _print_inference(result: "Inference") -> None:
    """One line per annotation and per TODO, on stderr (stdout holds only the diff)."""
    for proposal in result.written:
        print(f"{proposal.file}: inferred: {proposal.target.describe()}: {proposal.annotation.annotation()}",
              file=sys.stderr)
    for todo in result.todos:
        print(f"{todo.file}: todo: {todo.target.describe()}: {todo.text(result.todo_lines)}", file=sys.stderr)


def _print_failure(path: Path, failure: Failure) -> None:
    """``path:line: failed: reason`` on stderr (the traceback too, for an error of the codemod itself)."""
    place = f"{path}:{failure.line}" if failure.line is not None else str(path)
    print(f"{place}: failed: {failure.reason}", file=sys.stderr)
    if failure.traceback:
        print(failure.traceback.rstrip("\n"), file=sys.stderr)


def _migrate(args: argparse.Namespace, options: Options) -> int:
    """The codemod over every file: write or print each change, list the sites and the failures, and sum up."""
    if args.output_dir is not None:
        _copy_tree(args)
    jobs = _jobs(args)
    totals = Report()
    changed_files = failed_files = 0
    progress = Progress(len(jobs), enabled=not args.quiet)
    for job, outcome in zip(jobs, transformed(jobs, options, args.jobs)):
        totals.findings.extend(outcome.report.findings)
        if outcome.failure is not None:
            failed_files += 1
            progress.clear()
            _print_failure(job.source, outcome.failure)
        if not args.quiet and outcome.report.findings:
            progress.clear()
            for finding in outcome.report.findings:
                print(f"{job.source}:{finding.line}: {finding.kind}: {finding.message}", file=sys.stderr)
        if outcome.code != outcome.original:
            changed_files += 1
            if args.in_place or args.output_dir is not None:
                rewrite_source(job.destination, outcome.code)
            else:
                progress.clear()
                _print_diff(outcome.original, outcome.code, job.source)
        progress.step()
    progress.clear()
    print(f"spmd-migrate: {totals.rewritten} calls rewritten, {totals.todos} TODOs, "
          f"{totals.skipped} collectives inside autograd Functions left as is, "
          f"{changed_files} files changed", file=sys.stderr)
    if failed_files:
        print(f"spmd-migrate: {failed_files} files failed (named above) and were left as they were; "
              f"the others were migrated", file=sys.stderr)
        return 2
    return _check_status(args, changed_files)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        print(f"spmd-migrate: no such file or directory: {', '.join(missing)}", file=sys.stderr)
        return 2
    if args.jobs < 1:
        print("spmd-migrate: --jobs must be at least 1", file=sys.stderr)
        return 2
    if args.infer:
        return _infer(args)
    if args.write_overlay is not None:
        print("spmd-migrate: --write-overlay needs --infer", file=sys.stderr)
        return 2
    try:
        overlays = load_overlays(args.overlay)
        groups = _group_declarations(args.config_file)
    except (OverlayError, config.ConfigError) as err:
        print(f"spmd-migrate: {err}", file=sys.stderr)
        return 2
    return _migrate(args, Options(overlays, args.replicated_dst, tuple(args.root), groups))
