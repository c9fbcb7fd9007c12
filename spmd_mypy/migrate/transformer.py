"""The libcst transformer: finds mapping helpers and raw collectives, applies their plans.

Names are resolved through the file's imports by libcst's
``QualifiedNameProvider`` (aliases, ``from ... import x as y``, attribute
calls on an imported module); relative imports are resolved against the
file's package.  Plans come from :mod:`.plans`; this module only walks the
tree, attaches TODO comments to the enclosing statement and asks for imports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import libcst as cst
from libcst.codemod import CodemodContext, VisitorBasedCodemodCommand
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import PositionProvider, QualifiedName, QualifiedNameProvider, ScopeProvider
from libcst.metadata.scope_provider import ImportAssignment

from spmd_mypy.config import AxisNames
from spmd_mypy.migrate import plans
from spmd_mypy.migrate.names import absolute
from spmd_mypy.migrate.raw import LIST_COLLECTIVES, RAW_COLLECTIVES
from spmd_stubs.core.megatron_table import helper_for

__all__ = ["TODO_PREFIX", "Finding", "Report", "MigrateCommand"]

TODO_PREFIX = "# TODO(spmd-migrate): "

_AUTOGRAD_FUNCTIONS = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})


@dataclass(frozen=True)
class Finding:
    line: int
    kind: str  # "rewritten" | "todo" | "skipped"
    message: str


@dataclass
class Report:
    """What the codemod did to one file."""

    findings: list[Finding] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(1 for finding in self.findings if finding.kind == kind)

    @property
    def rewritten(self) -> int:
        return self.count("rewritten")

    @property
    def todos(self) -> int:
        return self.count("todo")

    @property
    def skipped(self) -> int:
        return self.count("skipped")


def _from_spmd_stubs(assignment: object) -> bool:
    """Whether a name's binding is an import from ``spmd_stubs`` (so using it is safe)."""
    if not isinstance(assignment, ImportAssignment):
        return False
    node = assignment.node
    if isinstance(node, cst.ImportFrom) and node.module is not None and not node.relative:
        return cst.Module([]).code_for_node(node.module).startswith("spmd_stubs")
    if isinstance(node, cst.Import):
        return any(cst.Module([]).code_for_node(alias.name) == "spmd_stubs" for alias in node.names)
    return False


class MigrateCommand(VisitorBasedCodemodCommand):
    """Rewrite mapping helpers and raw collectives of one module to typed collectives."""

    DESCRIPTION = "Rewrite Megatron/fairscale mapping helpers and torch.distributed collectives to spmd_stubs."
    METADATA_DEPENDENCIES = (QualifiedNameProvider, ScopeProvider, PositionProvider)

    def __init__(self, context: CodemodContext, replicated_dst: str | None = None,
                 groups: AxisNames = AxisNames()) -> None:
        super().__init__(context)
        self.replicated_dst = replicated_dst
        self.groups = groups
        self.report = Report()
        self._plans: dict[cst.Call, plans.Plan] = {}
        self._statement_calls: set[cst.Call] = set()
        self._parameters: list[frozenset[str]] = []
        self._in_autograd_function: list[bool] = []
        self._pending: list[str] = []

    # -- context --------------------------------------------------------------

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        bases = {q.name for base in node.bases for q in self._names(base.value)}
        self._in_autograd_function.append(bool(bases & _AUTOGRAD_FUNCTIONS))

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        self._in_autograd_function.pop()
        return updated_node

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        params = node.params
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        every += [p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]
        self._parameters.append(frozenset(p.name.value for p in every))

    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.FunctionDef:
        self._parameters.pop()
        return updated_node

    def visit_Expr(self, node: cst.Expr) -> None:
        if isinstance(node.value, cst.Call):
            self._statement_calls.add(node.value)

    def _names(self, node: cst.CSTNode) -> set[QualifiedName]:
        names = self.get_metadata(QualifiedNameProvider, node, set())
        return cast("set[QualifiedName]", names)

    def _qualified(self, func: cst.BaseExpression) -> list[tuple[str, bool]]:
        """The names ``func`` may refer to, absolute, each with whether it came from a relative import."""
        package = self.context.full_package_name or ""
        return sorted((absolute(q.name, package), q.name.startswith(".")) for q in self._names(func))

    # -- planning -------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        plan = self._plan(node)
        if plan is not None:
            self._plans[node] = self._unshadowed(node, plan)

    def _plan(self, node: cst.Call) -> plans.Plan | None:
        for name, relative in self._qualified(node.func):
            helper = helper_for(name, relative)
            if helper is not None:
                return plans.plan_helper(helper[0], helper[1], node, self._group_axis)
            if name in RAW_COLLECTIVES or name in LIST_COLLECTIVES:
                return self._plan_raw(name, node)
        return None

    def _plan_raw(self, name: str, node: cst.Call) -> plans.Plan | None:
        if any(self._in_autograd_function):
            # Inside a torch.autograd.Function the collective *is* the hand-written
            # forward or backward; a typed (differentiable) call there would be wrong.
            self._note(node, "skipped", f"{name} inside a torch.autograd.Function left as is")
            return None
        if name in LIST_COLLECTIVES:
            return plans.Todo(LIST_COLLECTIVES[name])
        site = plans.RawSite(
            is_statement=node in self._statement_calls,
            parameters=self._parameters[-1] if self._parameters else frozenset(),
            replicated_dst=self.replicated_dst,
        )
        return plans.plan_raw(name, RAW_COLLECTIVES[name], node, site, self._group_axis)

    def _group_axis(self, group: cst.BaseExpression) -> str | None:
        """The axis ``[spmd_mypy] groups`` declares for ``group``, else :func:`plans.group_axis`'s."""
        declared = self._declared_axis(group)
        return declared if declared is not None else plans.group_axis(group)

    def _declared_axis(self, group: cst.BaseExpression) -> str | None:
        """A declared ``*.attr`` for an attribute, a declared function's full name for a call of it."""
        if isinstance(group, cst.Attribute):
            return self.groups.of_attribute(group.attr.value)
        if not isinstance(group, cst.Call):
            return None
        declared = (self.groups.of_function(name) for name, _ in self._qualified(group.func))
        return next((axis for axis in declared if axis is not None), None)

    def _unshadowed(self, node: cst.Call, plan: plans.Plan) -> plans.Plan:
        """A rewrite whose short names (``tp``, ``R``, ``spmd``) mean something else here becomes a TODO."""
        if not isinstance(plan, plans.Rewrite):
            return plan
        scope = self.get_metadata(ScopeProvider, node, None)
        if scope is None:
            return plan
        for short in sorted({"spmd", plan.axis, *plan.type_names}):
            if any(not _from_spmd_stubs(a) for a in scope[short]):
                return plans.Todo(
                    f"{short} already names something else here; rename it and migrate again "
                    f"(the typed call is {plan.summary})"
                )
        return plan

    # -- applying -------------------------------------------------------------

    def _note(self, node: cst.CSTNode, kind: str, message: str) -> None:
        line = self.get_metadata(PositionProvider, node).start.line
        self.report.findings.append(Finding(line, kind, message))

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        plan = self._plans.get(original_node)
        if isinstance(plan, plans.Todo):
            self._note(original_node, "todo", plan.message)
            self._pending.append(plan.message)
        elif isinstance(plan, plans.Rewrite):
            self._note(original_node, "rewritten", plan.summary)
            self._require_imports(plan)
            if plan.target is None:
                return plan.call
        return updated_node

    def leave_Expr(self, original_node: cst.Expr, updated_node: cst.Expr) -> cst.BaseSmallStatement:
        plan = self._plans.get(original_node.value)  # type: ignore[call-overload]
        if isinstance(plan, plans.Rewrite) and plan.target is not None:
            return cst.Assign(
                targets=[cst.AssignTarget(cst.Name(plan.target))],
                value=plan.call,
                semicolon=updated_node.semicolon,
            )
        return updated_node

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[no-untyped-def]
        result = super().on_leave(original_node, updated_node)
        if self._pending and isinstance(result, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            result = self._with_todos(result)
        return result

    def _with_todos(self, statement: cst.SimpleStatementLine | cst.BaseCompoundStatement):  # type: ignore[no-untyped-def]
        """Attach the pending TODOs above the statement, once each (so a second run adds none)."""
        present = {line.comment.value for line in statement.leading_lines if line.comment is not None}
        added = []
        for message in dict.fromkeys(self._pending):
            text = TODO_PREFIX + message
            if text not in present:
                added.append(cst.EmptyLine(indent=True, comment=cst.Comment(text)))
        self._pending.clear()
        return statement.with_changes(leading_lines=[*statement.leading_lines, *added])

    def _require_imports(self, plan: plans.Rewrite) -> None:
        AddImportsVisitor.add_needed_import(self.context, "spmd_stubs", asname="spmd")
        for name in sorted(plan.type_names):
            AddImportsVisitor.add_needed_import(self.context, "spmd_stubs", name)
        AddImportsVisitor.add_needed_import(self.context, "spmd_stubs.axes", plan.axis)
