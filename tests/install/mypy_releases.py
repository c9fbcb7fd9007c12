"""The case files under a mypy release other than the environment's, installed beside it with ``pip --target``.

What a maintainer runs when mypy publishes a release (a candidate
included), over every case directory or the ones named::

    python -m tests.install.mypy_releases 2.5.0rc1
    python -m tests.install.mypy_releases 2.5.0rc1 annotations hints

It installs that mypy alone (``--no-deps``) into pytest's cache directory
(``.pytest_cache/d/mypy-releases``, which the tests share), checks that this environment has the dependencies it asks for,
runs the case files under it and prints what differs from their
expectations; exit status 0 when nothing does.  ``tests/install/test_versions.py``
runs a sample of the directories under every supported release the same way.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from tests.plugin.conftest import EXTRA_CONFIG, group_of
from tests.plugin.harness import CASES, ROOT, case_files, compare, config_text, expectations, parse_output, run_mypy

RELEASES_DIR = "mypy-releases"
"""The directory of pytest's cache the releases are installed into."""


class Unavailable(Exception):
    """The release cannot be installed or run here; the message says why and what to do."""


def install(version: str, root: Path) -> Path:
    """mypy ``version`` alone, installed once into ``root/<version>`` (kept; another process waits its turn).

    Raises :class:`Unavailable` where pip cannot install it (no package index)
    or this environment lacks a dependency it needs.
    """
    root.mkdir(parents=True, exist_ok=True)
    target = root / version
    with open(root / f"{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "mypy" / "version.py").exists():
            # Into a fresh directory, moved in place once complete: an interrupted install is not reused.
            staging = Path(tempfile.mkdtemp(prefix=f"{version}.", dir=root))
            done = subprocess.run(
                [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                 "--target", str(staging), f"mypy=={version}"],
                capture_output=True, text=True)
            if done.returncode != 0:
                shutil.rmtree(staging, ignore_errors=True)
                raise Unavailable(f"pip could not install mypy=={version} (exit {done.returncode}); these checks "
                                  f"need the package index (pip's configured index):\n{done.stderr[-2000:]}")
            shutil.rmtree(target, ignore_errors=True)
            staging.rename(target)
    missing = unmet_requirements(target)
    if missing:
        raise Unavailable(f"mypy {version} needs {', '.join(missing)}, which this environment lacks: "
                          "pip install them (mypy is installed without its dependencies, beside this one)")
    return target


def unmet_requirements(target: Path) -> list[str]:
    """The requirements of the mypy in ``target`` that this environment's distributions do not meet."""
    [dist] = metadata.distributions(path=[str(target)], name="mypy")
    unmet = []
    for text in dist.requires or []:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        try:
            installed = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            installed = None
        if installed is None or not requirement.specifier.contains(installed, prereleases=True):
            unmet.append(f"{requirement} (installed: {installed or 'none'})")
    return unmet


def problems_under(target: Path, directories: list[Path], cache: Path) -> dict[Path, list[str]]:
    """Each case file under ``directories`` whose diagnostics under the mypy in ``target`` differ from its
    expectations, with the differences (:func:`tests.plugin.harness.compare`).

    The files run as the case tests group them (one run per config, ``tests/plugin/conftest.py``), in
    a subprocess with ``target`` first on ``PYTHONPATH``; a run that crashes raises RuntimeError.
    """
    groups: dict[Path, list[Path]] = defaultdict(list)
    for directory in directories:
        for case in case_files(directory):
            groups[group_of(case)].append(case)
    environment = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(target), environment]))
    try:
        found: dict[Path, list[str]] = {}
        for group, files in groups.items():
            extra = group / EXTRA_CONFIG
            config = cache / f"{'default' if group == CASES else group.name}.ini"
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text(config_text(extra.read_text() if extra.exists() else ""))
            output = run_mypy(files, config, cache / "mypy_cache", CASES,
                              every_configuration="configurations" in config.read_text())
            diagnostics = parse_output(output, CASES)
            for case in files:
                problems = compare(expectations(case), diagnostics.get(case.resolve(), []))
                if problems:
                    found[case] = problems
        return found
    finally:
        if environment is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = environment


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.install.mypy_releases", description=__doc__.split("\n")[0])
    parser.add_argument("version", help="the mypy release to try, e.g. 2.5.0rc1")
    parser.add_argument("directories", nargs="*", help="case directories under tests/plugin/cases (default: all)")
    args = parser.parse_args(argv)
    root = ROOT / ".pytest_cache" / "d" / RELEASES_DIR
    try:
        target = install(args.version, root)
    except Unavailable as error:
        print(error, file=sys.stderr)
        return 2
    directories = [CASES / name for name in args.directories] or [CASES]
    found = problems_under(target, directories, root / f"{args.version}-cache")
    for case, problems in found.items():
        print(f"{case.relative_to(CASES)}:\n  " + "\n  ".join(problems))
    checked = sum(len(case_files(directory)) for directory in directories)
    print(f"mypy {args.version}: {checked - len(found)} of {checked} case files as expected")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
