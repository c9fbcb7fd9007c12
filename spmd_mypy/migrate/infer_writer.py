"""Writing inferred annotations and TODOs into one module's source (libcst: formatting and comments kept).

Parameters and returns are written as an overlay would write them
(:mod:`.overlay`).  An attribute is declared the way its class already
declares tensor attributes: at class level (``weight: Tensor[I@tp]``) if
the class has such declarations, else on its first ``self.NAME = value``
(``self.NAME: Tensor[I@tp] = value``).  Each is spelled the way the module
spells its own annotations (:mod:`.spelling`): ``Tensor[I@tp]``, or
``Tensor[I[tp]]`` and ``Tensor[Sharded[Literal[0], tp]]`` in a module kept
readable by pyright and ty.  The imports the annotations need
(``from spmd_stubs import Tensor, I``, ``from spmd_stubs.axes import tp``)
are added, merged with those that exist.  A TODO is a comment line above
the function (or class) it concerns, never written twice.
"""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

import libcst as cst
from libcst.codemod import CodemodContext, VisitorBasedCodemodCommand

from spmd_mypy.migrate.infer_rules import Proposal, Todo
from spmd_mypy.migrate.overlay import AliasName, ModuleOverlay, OverlayCommand, SpmdTuple, SpmdType, add_imports
from spmd_mypy.migrate.spelling import Spelling, spelling_of

__all__ = ["TODO_PREFIX", "write", "as_overlay"]

TODO_PREFIX = "# TODO(spmd-migrate): "


def as_overlay(proposals: Sequence[Proposal], self_style: frozenset[str] | set[str] = frozenset()) -> ModuleOverlay:
    """The proposals of one module as overlay entries (attributes in ``self_style`` left out)."""
    overlay = ModuleOverlay()
    for proposal in proposals:
        target = proposal.target
        if not target.name:
            if target.path not in self_style:
                assert not isinstance(proposal.annotation, SpmdTuple)
                overlay.attributes[target.path] = proposal.annotation
        else:
            overlay.functions.setdefault(target.path, {})[target.name] = proposal.annotation
    return overlay


class _SelfAttributes(VisitorBasedCodemodCommand):
    """``self.NAME = value`` -> ``self.NAME: Tensor[...] = value`` (the first such assignment of each)."""

    DESCRIPTION = "Annotate attributes where they are first assigned."

    def __init__(self, context: CodemodContext, declared: dict[str, SpmdType | AliasName]) -> None:
        super().__init__(context)
        self.declared = dict(declared)
        self.spelling = Spelling.AT
        self._path: list[str] = []
        self._self: list[str | None] = []

    def visit_Module(self, node: cst.Module) -> None:
        self.spelling = spelling_of(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._path.append(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        self._path.pop()
        return updated_node

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        params = node.params.params or node.params.posonly_params
        self._self.append(params[0].name.value if params else None)
        self._path.append(node.name.value)

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        self._self.pop()
        self._path.pop()
        return updated_node

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign | cst.AnnAssign:
        if len(self._path) < 2 or len(updated_node.targets) != 1 or not self._self:
            return updated_node
        target = updated_node.targets[0].target
        if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
                and target.value.value == self._self[-1]):
            return updated_node
        key = ".".join([*self._path[:-1], target.attr.value])
        spmd_type = self.declared.pop(key, None)
        if spmd_type is None:
            return updated_node
        add_imports(self.context, spmd_type, self.spelling)
        annotation = cst.Annotation(cst.parse_expression(spmd_type.annotation(self.spelling)))
        return cst.AnnAssign(target=target, annotation=annotation, value=updated_node.value)


_Definition = TypeVar("_Definition", cst.FunctionDef, cst.ClassDef)


class _Todos(VisitorBasedCodemodCommand):
    """A TODO comment line above each function or class a TODO names (once)."""

    DESCRIPTION = "Add TODO comments for annotations left to the user."

    def __init__(self, context: CodemodContext, todos: dict[str, list[str]]) -> None:
        super().__init__(context)
        self.todos = todos
        self._path: list[str] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._path.append(node.name.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._path.append(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        return self._comment(updated_node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        return self._comment(updated_node)

    def _comment(self, node: _Definition) -> _Definition:
        messages = self.todos.get(".".join(self._path), [])
        self._path.pop()
        present = {line.comment.value for line in node.leading_lines if line.comment is not None}
        added: list[cst.EmptyLine] = [
            cst.EmptyLine(comment=cst.Comment(TODO_PREFIX + m)) for m in messages if TODO_PREFIX + m not in present
        ]
        return node.with_changes(leading_lines=[*node.leading_lines, *added]) if added else node


_SORTED_MODULES = ("spmd_stubs", "spmd_stubs.axes")


class _SortedImports(cst.CSTTransformer):
    """``from spmd_stubs import V, I, Tensor`` -> ``... import I, Tensor, V`` where names were added to it."""

    def __init__(self, before: dict[str, set[str]]) -> None:
        super().__init__()
        self.before = before

    def leave_ImportFrom(self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom) -> cst.ImportFrom:
        module = cst.Module([]).code_for_node(updated_node.module) if updated_node.module is not None else ""
        names = updated_node.names
        if module not in _SORTED_MODULES or isinstance(names, cst.ImportStar) or updated_node.lpar is not None:
            return updated_node
        if {cst.Module([]).code_for_node(a.name) for a in names} == self.before.get(module):
            return updated_node
        ordered = sorted(names, key=lambda a: cst.Module([]).code_for_node(a))
        last = len(ordered) - 1
        return updated_node.with_changes(names=[
            a.with_changes(comma=cst.MaybeSentinel.DEFAULT if i == last else cst.Comma(
                whitespace_after=cst.SimpleWhitespace(" "))) for i, a in enumerate(ordered)])


def _imported(tree: cst.Module) -> dict[str, set[str]]:
    """The names each ``from spmd_stubs(.axes) import ...`` of the module imports."""
    found: dict[str, set[str]] = {}
    for statement in tree.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.ImportFrom) and small.module is not None and not isinstance(
                        small.names, cst.ImportStar):
                    module = cst.Module([]).code_for_node(small.module)
                    found.setdefault(module, set()).update(cst.Module([]).code_for_node(a.name) for a in small.names)
    return found


def write(code: str, module: str, proposals: Sequence[Proposal], todos: Sequence[Todo] = (),
          class_style: dict[str, bool] | None = None, moved: Callable[[str, int], int] | None = None) -> str:
    """``code`` with the proposals (all of module ``module``) written and the TODOs added.

    ``class_style`` (``Class`` -> whether it declares tensor attributes at
    class level) picks where an attribute's declaration goes; ``moved``
    gives the line a TODO should name for a line it names.
    """
    styles = class_style or {}
    self_style = {p.target.path for p in proposals
                  if not p.target.name and not styles.get(p.target.path.rsplit(".", 1)[0], False)}
    tree = cst.parse_module(code)
    before = _imported(tree)
    overlay = as_overlay(proposals, self_style)
    if overlay.functions or overlay.attributes:
        tree = OverlayCommand(CodemodContext(full_module_name=module), overlay).transform_module(tree)
    declared = {p.target.path: p.annotation for p in proposals if p.target.path in self_style
                and isinstance(p.annotation, (SpmdType, AliasName))}
    if declared:
        command = _SelfAttributes(CodemodContext(full_module_name=module), declared)
        tree = command.transform_module(tree)
        if command.declared:  # no plain first assignment to annotate: declare at class level
            rest = ModuleOverlay(attributes=dict(command.declared))
            tree = OverlayCommand(CodemodContext(full_module_name=module), rest).transform_module(tree)
    tree = tree.visit(_SortedImports(before))
    if todos:
        by_place: dict[str, list[str]] = {}
        for todo in todos:
            place = todo.target.path.rsplit(".", 1)[0] if not todo.target.name else todo.target.path
            by_place.setdefault(place, []).append(f"{todo.target.describe()}: {todo.text(moved)}")
        tree = _Todos(CodemodContext(full_module_name=module), by_place).transform_module(tree)
    return tree.code
