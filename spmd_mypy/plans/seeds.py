"""The inputs of an owner's ``forward`` that the plan decides: each as its first planned consumer takes it.

The planned module's own inputs come from its caller, whose code is not
followed; one handed to a planned sub-module (by position or by keyword)
is taken to be what that sub-module's style takes: the caller passes what
the plan declares.  It may reach that sub-module through names bound to it
(``h = self.norm(x)`` at the top of ``forward``) and through unplanned
modules that keep its layout: torch's norms, activations and dropouts, and
a module of the user's class that holds only visible plain parameters and
no sub-modules (a norm written in python), which seeding takes to compute
per token.
"""

from __future__ import annotations

import ast
from typing import Mapping

from mypy.checker import TypeChecker

from spmd_mypy.plans.plain import user_parameters
from spmd_mypy.plans.tree import Node
from spmd_stubs.core import AxisType
from spmd_stubs.core.parallel_styles import StyleTypes
from spmd_stubs.core.torch_ops.modules import BY_MODULE

_DEPTH = 8
"""How many names and modules an input is followed through."""


def seeded_inputs(api: TypeChecker, function: ast.FunctionDef, node: Node,
                  planned: Mapping[str, StyleTypes | None]) -> dict[str, AxisType]:
    """Each input of ``node.forward`` handed to a planned sub-module (by position or by keyword) as it is, or
    through names bound to it and modules that keep its layout (``h = self.norm(x)``, ``self.attention(h)``),
    as that sub-module takes it (the first such call in the source)."""
    names = {a.arg for a in [*function.args.posonlyargs, *function.args.args][1:]}
    seeds: dict[str, AxisType] = {}
    calls = sorted((c for c in ast.walk(function) if isinstance(c, ast.Call)), key=lambda c: (c.lineno, c.col_offset))
    for call in calls:
        child = _child(call, node)
        types = planned.get(child.path) if child is not None else None
        if types is None:
            continue
        keyword_inputs = types.keyword_inputs
        named = [(k.value, keyword_inputs[k.arg].needed) for k in call.keywords if k.arg is not None
                 and k.arg in keyword_inputs]
        for arg, needed in [*zip(call.args, types.inputs), *named]:
            origin = _origin(api, arg, call.lineno, function, node, planned)
            if origin in names and origin not in seeds and needed is not None:
                seeds[origin] = needed
    return seeds


def _origin(api: TypeChecker, expr: ast.expr, line: int, function: ast.FunctionDef, node: Node,
            planned: Mapping[str, StyleTypes | None], depth: int = _DEPTH) -> str | None:
    """The name ``expr`` (read at ``line``) is, with its layout, through the top-level assignments before it
    and the unplanned modules that keep a layout; None where it is something else."""
    inner = _child(expr, node) if isinstance(expr, ast.Call) and len(expr.args) == 1 and not expr.keywords else None
    if inner is not None and inner.path not in planned and _keeps_layout(api, inner) and depth:
        assert isinstance(expr, ast.Call)
        return _origin(api, expr.args[0], expr.lineno, function, node, planned, depth - 1)
    if not isinstance(expr, ast.Name):
        return None
    bindings = [(n.lineno, n) for n in ast.walk(function) if isinstance(n, (ast.stmt, ast.expr))
                and n is not function and expr.id in _names_bound(n) and n.lineno < line]
    if not bindings:
        return expr.id
    _, last = max(bindings, key=lambda found: found[0])
    if last in function.body and isinstance(last, ast.Assign) and len(last.targets) == 1 and isinstance(
            last.targets[0], ast.Name) and depth:
        return _origin(api, last.value, last.lineno, function, node, planned, depth - 1)
    return None


def _names_bound(node: ast.AST) -> set[str]:
    """The names a statement or expression binds by itself."""
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.NamedExpr)):
        targets = [node.target]
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
    elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
        return {getattr(node, "name", "")} | {a.asname or a.name for a in getattr(node, "names", [])}
    return {n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)}


def _child(call: ast.expr, node: Node) -> Node | None:
    """The sub-module ``self.X`` a call ``self.X(...)`` calls."""
    callee = call.func if isinstance(call, ast.Call) else None
    return node.children.get(callee.attr) if isinstance(callee, ast.Attribute) and isinstance(
        callee.value, ast.Name) and callee.value.id == "self" else None


def _keeps_layout(api: TypeChecker, node: Node) -> bool:
    """A torch module computing per element or per token (a norm, an activation, dropout): its output is laid
    out as its input.  A module of the user's class that holds only visible plain parameters and no
    sub-modules (a norm written in python) is taken to compute per token too: seeding assumes it."""
    form = next((BY_MODULE[base.fullname] for base in node.info.mro if base.fullname in BY_MODULE), None) \
        if node.info is not None else None
    if form is None and node.info is not None and not node.children and not node.info.fullname.startswith("torch."):
        return bool(user_parameters(api, node.info))
    return form is not None and form.op not in ("linear", "embedding", "softmax", "log_softmax", "softmin")
