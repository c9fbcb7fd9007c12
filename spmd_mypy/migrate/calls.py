"""Small helpers over libcst call nodes: binding arguments, reading literals, building typed calls."""

from __future__ import annotations

from typing import Sequence

import libcst as cst

from spmd_stubs import core

__all__ = [
    "bind",
    "is_none",
    "literal_bool",
    "source",
    "keyword",
    "typed_call",
    "type_names",
]

_NO_SPACE = cst.AssignEqual(
    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
)


def bind(args: Sequence[cst.Arg], params: Sequence[str]) -> dict[str, cst.Arg] | str:
    """Match a call's arguments to parameter names, or say why that is not possible."""
    bound: dict[str, cst.Arg] = {}
    for index, arg in enumerate(args):
        if arg.star:
            return f"is called with {arg.star}-unpacked arguments"
        if arg.keyword is None:
            if index >= len(params):
                return "has more positional arguments than it takes"
            name = params[index]
        else:
            name = arg.keyword.value
            if name not in params:
                return f"has an argument {name}= the codemod does not know"
        if name in bound:
            return f"gets {name} twice"
        bound[name] = arg
    return bound


def is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def literal_bool(expr: cst.BaseExpression) -> bool | None:
    """True / False for the literal names, None for anything computed."""
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return None


def source(node: cst.CSTNode) -> str:
    """The node's source text, for messages and group-name matching."""
    return cst.Module([]).code_for_node(node)


def keyword(name: str, value: cst.BaseExpression) -> cst.Arg:
    """``name=value`` written without spaces, as PEP 8 has it."""
    return cst.Arg(keyword=cst.Name(name), value=value, equal=_NO_SPACE)


def type_names(type_text: str) -> set[str]:
    """The ``spmd_stubs`` names a src/dst text needs: ``"S(-1)"`` -> ``{"S"}``."""
    axis_type = core.parse_axis_type(type_text)
    return {"S"} if axis_type.shard is not None else {axis_type.kind.value}


def typed_call(
    original: cst.Call,
    op: str,
    x: cst.BaseExpression,
    axis: str,
    src: str,
    dst: str,
    extra: Sequence[cst.Arg] = (),
) -> cst.Call:
    """``spmd.<op>(x, axis, src=.., dst=.., *extra)`` laid out like ``original``.

    The new call keeps the original's parentheses and the whitespace after
    ``(`` and before ``)``, so a call split over lines stays split the same
    way; a trailing comma stays a trailing comma.
    """
    args = [
        cst.Arg(x),
        cst.Arg(cst.Name(axis)),
        keyword("src", cst.parse_expression(src)),
        keyword("dst", cst.parse_expression(dst)),
        *extra,
    ]
    last_original = original.args[-1] if original.args else None
    if last_original is not None:
        last = args[-1].with_changes(whitespace_after_arg=last_original.whitespace_after_arg)
        if isinstance(last_original.comma, cst.Comma):
            last = last.with_changes(comma=last_original.comma)
        args[-1] = last
    return original.with_changes(
        func=cst.Attribute(cst.Name("spmd"), cst.Name(op)),
        args=[arg.with_changes(comma=cst.MaybeSentinel.DEFAULT) for arg in args[:-1]] + [args[-1]],
    )
