"""The ``spmd-migrate`` command line.

    spmd-migrate [--diff | --in-place | --output-dir DIR] [--overlay FILE ...]
                 [--replicated-dst R|I] [--config-file FILE] PATH ...
    spmd-migrate --infer [--diff | --in-place | --output-dir DIR | --write-overlay FILE]
                 [--config-file FILE] [--cache-dir DIR] PATH ...

PATHs are files or directories (searched for ``*.py``).  Without a mode the
command only prints a diff: nothing is written unless asked.  With
``--output-dir`` every PATH is copied under DIR (a directory PATH keeps its
own name, so ``spmd-migrate --output-dir out site-packages/fairscale`` writes
``out/fairscale/...``) and the copies are migrated; the originals are never
touched.  Module names (for relative imports and overlays) come from the
path below a ``--root`` (needed for namespace packages such as
``megatron``), else from the ``__init__.py`` files around each original.
The mesh axis of a ``group=`` comes from the checker's ``[spmd_mypy] groups``
declaration in ``--config-file``, or in the config file mypy would find
from the current directory; the codemod's name guesses fill in the rest.

``--infer`` instead writes the SPMD annotations the code lacks, from what
mypy with the plugin infers (:mod:`.infer`), into the sources or, with
``--write-overlay``, into an overlay file for code the user does not own.
"""

from __future__ import annotations

import argparse
import difflib
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from spmd_mypy import config
from spmd_mypy.migrate.engine import migrate_source
from spmd_mypy.migrate.names import module_of_path
from spmd_mypy.migrate.overlay import ModuleOverlay, OverlayError, apply_overlay, load_overlays
from spmd_mypy.migrate.transformer import Report

if TYPE_CHECKING:
    from spmd_mypy.migrate.infer import Inference

__all__ = ["main"]


@dataclass(frozen=True)
class Job:
    """One file: read from ``source`` (which also names its module), write to ``destination``."""

    source: Path
    destination: Path


def _python_files(path: Path) -> list[Path]:
    return sorted(path.rglob("*.py")) if path.is_dir() else [path]


def _jobs(paths: Sequence[Path], output_dir: Path | None) -> list[Job]:
    jobs = []
    for root in paths:
        for file in _python_files(root):
            if output_dir is None:
                destination = file
            elif root.is_dir():
                destination = output_dir / root.name / file.relative_to(root)
            else:
                destination = output_dir / file.name
            jobs.append(Job(file, destination))
    return jobs


def _copy_tree(paths: Sequence[Path], output_dir: Path) -> None:
    """Copy every PATH whole (data files and all), so a copied package still imports."""
    for root in paths:
        if root.is_dir():
            shutil.copytree(root, output_dir / root.name, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            output_dir.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root, output_dir / root.name)


def _transform(
    job: Job, overlays: dict[str, ModuleOverlay], replicated_dst: str | None, roots: Sequence[Path],
    groups: config.GroupDeclarations,
) -> tuple[str, str, Report]:
    original = job.source.read_text()
    module = module_of_path(job.source, roots)
    code = original
    if module in overlays:
        code = apply_overlay(code, module, overlays[module])
    result = migrate_source(code, module, is_package=job.source.name == "__init__.py",
                            replicated_dst=replicated_dst, groups=groups)
    return original, result.code, result.report


def _group_declarations(config_file: Path | None) -> config.GroupDeclarations:
    """``[spmd_mypy] groups`` of the config file given, else of the one mypy would read here."""
    if config_file is not None and not config_file.is_file():
        raise config.ConfigError(f"no such config file: {config_file}")
    found = str(config_file) if config_file is not None else config.find_config_file(Path.cwd())
    return config.load(found).groups


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spmd-migrate",
        description="Rewrite Megatron/fairscale mapping helpers and torch.distributed collectives "
        "to typed spmd_stubs collectives.",
    )
    parser.add_argument("paths", nargs="+", type=Path, help="files or directories")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--diff", action="store_true", help="print a unified diff (the default)")
    mode.add_argument("--in-place", action="store_true", help="rewrite the files")
    mode.add_argument("--output-dir", type=Path, help="copy the paths under DIR and rewrite the copies")
    parser.add_argument("--overlay", type=Path, action="append", default=[],
                        help="a TOML file of SPMD annotations to apply first (repeatable)")
    parser.add_argument("--replicated-dst", choices=("R", "I"),
                        help="dst for raw all_reduce/all_gather results (otherwise a TODO)")
    parser.add_argument("--root", type=Path, action="append", default=[],
                        help="a directory imports start from (like site-packages); needed to name "
                        "modules of namespace packages such as megatron (repeatable)")
    parser.add_argument("--config-file", type=Path,
                        help="the mypy config file whose [spmd_mypy] groups name the axes of process groups "
                        "(default: the one mypy would find from the current directory)")
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
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
        found = config.find_config_file(Path.cwd())
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
        _copy_tree(args.paths, args.output_dir)
        for job in _jobs(args.paths, args.output_dir):
            if job.source.resolve() in changed:
                job.destination.write_text(result.texts[job.source.resolve()])
    elif args.in_place:
        for path in changed:
            path.write_text(result.texts[path])
    else:
        for path in changed:
            shown = str(_shown_path(path))
            sys.stdout.writelines(difflib.unified_diff(
                result.originals[path].splitlines(keepends=True), result.texts[path].splitlines(keepends=True),
                fromfile=shown, tofile=shown))
    print(f"spmd-migrate --infer: {result.count('parameter')} parameters, {result.count('return')} returns, "
          f"{result.count('attribute')} attributes inferred, {len(result.todos)} TODOs, "
          f"{len(changed)} files changed ({result.runs} mypy runs)", file=sys.stderr)
    return 0


def _shown_path(path: Path) -> Path:
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def _print_inference(result: "Inference") -> None:
    for proposal in result.written:
        print(f"{proposal.file}: inferred: {proposal.target.describe()}: {proposal.annotation.annotation()}")
    for todo in result.todos:
        print(f"{todo.file}: todo: {todo.target.describe()}: {todo.text()}")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        print(f"spmd-migrate: no such file or directory: {', '.join(missing)}", file=sys.stderr)
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
    if args.output_dir is not None:
        _copy_tree(args.paths, args.output_dir)
    totals = Report()
    changed_files = 0
    for job in _jobs(args.paths, args.output_dir):
        try:
            original, code, report = _transform(job, overlays, args.replicated_dst, args.root, groups)
        except OverlayError as err:
            print(f"spmd-migrate: {err}", file=sys.stderr)
            return 2
        totals.findings.extend(report.findings)
        if not args.quiet:
            for finding in report.findings:
                print(f"{job.source}:{finding.line}: {finding.kind}: {finding.message}")
        if code == original:
            continue
        changed_files += 1
        if args.in_place or args.output_dir is not None:
            job.destination.write_text(code)
        else:
            sys.stdout.writelines(difflib.unified_diff(
                original.splitlines(keepends=True), code.splitlines(keepends=True),
                fromfile=str(job.source), tofile=str(job.source)))
    print(f"spmd-migrate: {totals.rewritten} calls rewritten, {totals.todos} TODOs, "
          f"{totals.skipped} collectives inside autograd Functions left as is, "
          f"{changed_files} files changed", file=sys.stderr)
    return 0
