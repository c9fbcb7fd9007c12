"""Migrate one module's source text: the entry point the CLI and the tests share."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from libcst.codemod import CodemodContext

from spmd_mypy.config import GroupDeclarations
from spmd_mypy.migrate.names import package_of_module
from spmd_mypy.migrate.transformer import MigrateCommand, Report

__all__ = ["Result", "migrate_source"]


@dataclass(frozen=True)
class Result:
    code: str
    report: Report


def migrate_source(
    code: str, module: str = "", *, is_package: bool = False, replicated_dst: str | None = None,
    groups: GroupDeclarations = GroupDeclarations(),
) -> Result:
    """Rewrite ``code`` (the module ``module``, used for relative imports).

    ``replicated_dst`` ("R" or "I") is the dst given to raw all_reduce and
    all_gather calls, whose replicated result could be either; without it
    they get a TODO.  ``groups`` (the checker's ``[spmd_mypy] groups``)
    names the mesh axis of the process groups it declares.
    """
    if replicated_dst not in (None, "R", "I"):
        raise ValueError(f"replicated_dst must be R or I, got {replicated_dst!r}")
    context = CodemodContext(full_module_name=module, full_package_name=package_of_module(module, is_package))
    command = MigrateCommand(context, replicated_dst=replicated_dst, groups=groups)
    tree = command.transform_module(cst.parse_module(code))
    return Result(tree.code, command.report)
