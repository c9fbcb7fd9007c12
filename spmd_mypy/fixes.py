"""A rule's :class:`~spmd_stubs.core.Fix` as an edit of the user's source, for tools.

With ``show_fixes = true`` in ``[spmd_mypy]`` every SPMD diagnostic is
followed by a note ``Fix as an edit: {...}``: a JSON object with the span to
replace (``line``/``end_line`` 1-based, ``column``/``end_column`` 0-based
indices of characters in the line, as Python slices a ``str``, the end
exclusive), the ``replacement`` text, and
the ``imports`` the replacement needs that the module lacks.  A diagnostic
whose fix needs a choice says so: ``Fix as an edit: none (needs your
choice)``.  The replacement names the typed API the way the module already
imports it (``spmd.all_reduce`` after ``import spmd_stubs as spmd``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Sequence

from mypy.nodes import CallExpr, Context, Expression, MypyFile
from mypy.plugin import CheckerPluginInterface

from spmd_mypy.build_state import state_of
from spmd_mypy.representation import spmd_members
from spmd_mypy.sources import SourceUnreadable
from spmd_stubs.core import CASTS, COLLECTIVES, AxisType, Fix, Scalar, SpmdTypeError, Target

PREFIX = "Fix as an edit: "
NO_EDIT = f"{PREFIX}none (needs your choice)"
SEVERAL = f"{PREFIX}none (needs your choice: the value it rewrites has several types here, which one rewrite cannot all fix)"

_PACKAGE = "spmd_stubs"
_FUNCTION = re.compile(rf"(?<![.\w])({'|'.join((*COLLECTIVES, *CASTS, 'redistribute'))})\(")
_TYPE_NAME = re.compile(r"\b(?:src|dst)=([A-Za-z]+)")
_AXIS = re.compile(r"\(.*?, ([A-Za-z_]\w*), src=")


@dataclass(frozen=True)
class Operand:
    """One operand of the failing op: its expression (None: no source) and its type on the error's axis."""

    expr: Expression | None
    axis_type: AxisType | Scalar | None


def note(api: CheckerPluginInterface, node: Context, error: SpmdTypeError, operands: Sequence[Operand]) -> str:
    """The note that carries ``error``'s fix as an edit."""
    fix = error.fix
    if fix is None:
        return NO_EDIT
    target = _target(node, fix, operands)
    if target is None:
        return NO_EDIT
    edited, tensor = target
    if _several(api, tensor, error.axis):
        return SEVERAL
    tree: MypyFile = api.tree  # type: ignore[attr-defined]
    sources = state_of(api).sources
    end_line, end_column = edited.end_line, edited.end_column
    if end_line is None or end_column is None:
        return NO_EDIT
    try:
        source = sources.text_of(tree, tensor)
        lines = sources.lines(tree)
        column = sources.index(lines[edited.line - 1], edited.column)
        end_column = sources.index(lines[end_line - 1], end_column)
    except (SourceUnreadable, IndexError):
        return NO_EDIT
    template, imports = _qualified(fix.template, tree)
    replacement = replace(fix, template=template).applied_to(source)
    edit = {
        "line": edited.line, "column": column, "end_line": end_line, "end_column": end_column,
        "replacement": replacement, "imports": imports,
    }
    return PREFIX + json.dumps(edit)


def _target(node: Context, fix: Fix, operands: Sequence[Operand]) -> tuple[Context, Expression] | None:
    """What the edit replaces, and the expression ``{x}`` stands for (the input, for a call)."""
    if fix.target is Target.CALL:
        return (node, node.args[0]) if isinstance(node, CallExpr) and node.args else None
    for operand in operands:
        typ = operand.axis_type
        if operand.expr is not None and isinstance(typ, AxisType) and typ.local == _local(fix.operand):
            return operand.expr, operand.expr
    return None


def _several(api: CheckerPluginInterface, expr: Expression, axis: str) -> bool:
    """Whether ``expr`` has several types on ``axis`` (a union after a branch join): a rewrite that
    fits one of them breaks another, so the fix is where the branches join."""
    typ = api.lookup_type_or_none(expr)  # type: ignore[attr-defined]
    members = spmd_members(typ) if typ is not None else []
    on_axis = {member.get(axis) if member is not None else None for member in members}
    return len({t.local if t is not None else None for t in on_axis}) > 1


def _local(operand: AxisType | None) -> AxisType | None:
    return operand.local if operand is not None else None


def _qualified(template: str, tree: MypyFile) -> tuple[str, list[str]]:
    """A fix's ``template`` with the typed API named as ``tree`` imports it, and the imports it still needs."""
    names = tree.names
    imports: list[str] = []
    module = next((name for name, symbol in names.items()
                   if isinstance(symbol.node, MypyFile) and symbol.node.fullname == _PACKAGE), None)

    def function(match: re.Match[str]) -> str:
        name = match.group(1)
        symbol = names.get(name)
        if symbol is not None and _is_typed_api(symbol.fullname, name):
            return match.group(0)
        if module is None and f"import {_PACKAGE}" not in imports:
            imports.append(f"import {_PACKAGE}")
        return f"{module or _PACKAGE}.{name}("

    template = _FUNCTION.sub(function, template)
    # The templates name only the package's own types and axes.
    imports += [f"from {_PACKAGE} import {name}" for name in dict.fromkeys(_TYPE_NAME.findall(template))
                if name not in names]
    imports += [f"from {_PACKAGE}.axes import {axis}" for axis in dict.fromkeys(_AXIS.findall(template))
                if axis not in names]
    return template, imports


def _is_typed_api(fullname: str | None, name: str) -> bool:
    return fullname is not None and fullname.startswith(f"{_PACKAGE}.") and fullname.endswith(f".{name}")
