"""Module names: which package a file is in, and what a relative import means.

libcst's ``QualifiedNameProvider`` keeps relative imports relative
(``.mappings.copy_to_model_parallel_region``); resolving them needs the
file's package, which Python derives from the ``__init__.py`` files around
it, and so do we.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

__all__ = ["module_of_path", "package_of_module", "absolute"]


def module_of_path(path: Path, roots: Sequence[Path] = ()) -> str:
    """``.../fairscale/nn/model_parallel/layers.py`` -> ``fairscale.nn.model_parallel.layers``.

    Under one of ``roots`` (directories imports start from, like
    site-packages) the name is the path below the root, which is the only
    way to see a namespace package such as ``megatron`` (no ``__init__.py``).
    Otherwise walk up while the directory is a package (has ``__init__.py``);
    a file outside any package is a top-level module named by its stem.
    """
    path = path.resolve()
    for root in roots:
        if path.is_relative_to(root.resolve()):
            parts = list(path.relative_to(root.resolve()).with_suffix("").parts)
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    parts = [] if path.name == "__init__.py" else [path.stem]
    directory = path.parent
    while (directory / "__init__.py").is_file():
        parts.append(directory.name)
        directory = directory.parent
    return ".".join(reversed(parts))


def package_of_module(module: str, is_package: bool = False) -> str:
    """The package relative imports resolve against: the module itself for an ``__init__``."""
    return module if is_package else module.rpartition(".")[0]


def absolute(name: str, package: str) -> str:
    """Resolve ``..core.x`` against ``package``; an absolute name is returned as is."""
    stripped = name.lstrip(".")
    level = len(name) - len(stripped)
    if level == 0:
        return name
    base = package.split(".") if package else []
    if level - 1 > len(base):
        return stripped  # beyond the known top-level package: keep the tail
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, stripped]) if base else stripped
