"""Migrate one module: the libcst codemod the command runs on each file, and the entry point the tests share."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from libcst.codemod import Codemod, CodemodContext

from spmd_mypy.config import AxisNames
from spmd_mypy.migrate.names import package_of_module
from spmd_mypy.migrate.overlay import ModuleOverlay, overlaid
from spmd_mypy.migrate.transformer import MigrateCommand, Report

__all__ = ["FileMigration", "Result", "migrate_source", "module_context"]


@dataclass(frozen=True)
class Result:
    code: str
    report: Report


def module_context(module: str, is_package: bool = False) -> CodemodContext:
    """The codemod context of the module ``module`` (its package resolves relative imports)."""
    return CodemodContext(full_module_name=module, full_package_name=package_of_module(module, is_package))


class FileMigration(Codemod):
    """One module's migration: its overlay's annotations written first (if it has one), then the calls rewritten.

    ``replicated_dst`` ("R" or "I") is the dst given to raw all_reduce and
    all_gather calls, whose replicated result could be either; without it
    they get a TODO.  ``groups`` (the checker's ``[spmd_mypy] groups``)
    names the mesh axis of the process groups it declares.  ``report``
    says what was done; a stale overlay entry raises OverlayError.
    """

    def __init__(self, context: CodemodContext, *, overlay: ModuleOverlay | None = None,
                 replicated_dst: str | None = None, groups: AxisNames = AxisNames()) -> None:
        super().__init__(context)
        if replicated_dst not in (None, "R", "I"):
            raise ValueError(f"replicated_dst must be R or I, got {replicated_dst!r}")
        self.overlay = overlay
        self.replicated_dst = replicated_dst
        self.groups = groups
        self.report = Report()

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        if self.overlay is not None:
            tree = overlaid(tree, self.context.full_module_name or "", self.overlay)
        command = MigrateCommand(self.context, replicated_dst=self.replicated_dst, groups=self.groups)
        tree = command.transform_module(tree)
        self.report = command.report
        return tree


def migrate_source(
    code: str, module: str = "", *, is_package: bool = False, replicated_dst: str | None = None,
    groups: AxisNames = AxisNames(),
) -> Result:
    """Rewrite ``code`` (the module ``module``, used for relative imports); see :class:`FileMigration`."""
    migration = FileMigration(module_context(module, is_package), replicated_dst=replicated_dst, groups=groups)
    tree = migration.transform_module(cst.parse_module(code))
    return Result(tree.code, migration.report)
