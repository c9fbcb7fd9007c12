"""Hypothesis strategies for hostile inputs to the mypy plugin.

Every module is valid Python (mypy must analyse it, not stop at a syntax
error) but its SPMD content is random and often wrong: mutated annotations
(unknown letters and axes, ``S`` without a dim, nested junk, almost-right
syntax, both spellings mixed), random op sequences on typed and untyped
tensors, collectives with bad arguments, branches that join different types,
unions and optionals, partially typed code, classes and modules. The plugin
may report anything about them; it must never crash mypy.
"""

from __future__ import annotations

import warnings

from hypothesis import strategies as st

# --------------------------------------------------------------------------
# Annotations
# --------------------------------------------------------------------------

_LETTERS = ["R", "I", "V", "P", "S(0)", "S(-1)", "S(1)", "S(7)"]
_BAD_LETTERS = ["S", "S()", "S(x)", "S(0, 1)", "S('0')", "S(-0)", "X", "r", "Q", "None", "1", "R[tp]", "(R)", "R.x", "S(True)", "S(1.5)"]
_AXES = ["tp", "dp", "cp", "ep", "pp"]
_BAD_AXES = ["foo", "1", "'tp'", "tp.x", "(dp, tp)", "tp@dp", "None", "Tensor", "R", "torch"]

letters = st.sampled_from(_LETTERS) | st.sampled_from(_BAD_LETTERS)
axes = st.sampled_from(_AXES) | st.sampled_from(_BAD_AXES)


@st.composite
def axis_entries(draw: st.DrawFn) -> str:
    """One axis entry of an annotation, right or almost right."""
    letter, axis = draw(letters), draw(axes)
    return draw(
        st.sampled_from(
            [
                f"{letter}@{axis}",
                f"{letter}[{axis}]",
                f"S[{draw(st.integers(-3, 3))}, {axis}]",
                f"S[{axis}]",
                f"{letter}@{axis}@{draw(axes)}",
                f"{letter} @ ({axis})",
                f"-{letter}@{axis}",
                f"{letter}@{axis} + 1",
                f"{letter}@{axis}[0]",
                f"{letter}",
                f"{axis}",
                "...",
                f"Tensor[{letter}@{axis}]",
                f"{letter}[{axis}, {draw(axes)}]",
            ]
        )
    )


@st.composite
def tensor_annotations(draw: st.DrawFn) -> str:
    """``Tensor[...]`` with 0-4 entries (or none at all), sometimes wrapped."""
    entries = draw(st.lists(axis_entries(), min_size=1, max_size=4))
    core = draw(st.sampled_from([f"Tensor[{', '.join(entries)}]", "Tensor", "torch.Tensor", f"Tensor[({', '.join(entries)},)]", f"Tensor[[{entries[0]}]]"]))
    return draw(
        st.sampled_from(
            [core, core, f"Optional[{core}]", f"Union[{core}, Tensor[R@tp]]", f"list[{core}]", f"tuple[{core}, {core}]", f'"{core}"', "Any", "int"]
        )
    )


# --------------------------------------------------------------------------
# Statements
# --------------------------------------------------------------------------

_BINOPS = ["+", "-", "*", "@", "/", "**"]
_METHODS = [
    "sum()", "sum(dim=0)", "sum(0, keepdim=True)", "mean()", "T", "view(-1)", "reshape(2, -1)", "transpose(0, 1)",
    "add_({y})", "mul_(2)", "copy_({y})", "foo()", "detach()", "to(torch.float16)", "clone()", "neg()", "exp()",
    "matmul({y})", "backward()", "item()", "__add__({y})", "t()", "cumsum(0)", "softmax(-1)",
]
_FUNCS = [
    "torch.tanh({x})", "torch.matmul({x}, {y})", "torch.einsum('ij,jk->ik', {x}, {y})", "torch.where({x} > 0, {x}, {y})",
    "torch.cat([{x}, {y}])", "torch.stack(({x}, {y}))", "F.linear({x}, {y})", "F.linear({x}, {y}, {x})", "F.gelu({x})",
    "torch.add({x}, {y}, alpha=2)", "torch.mm({x}, {y}, out={x})", "{x}[0]", "{x}[{y}]", "{x}[:, 1:]", "{x} if flag else {y}",
    "unknown_fn({x})", "(lambda t: t * 2)({x})", "[t for t in ({x}, {y})][0]", "dist.all_reduce({x})", "dist.all_reduce({x}, group=None)",
    "torch.autograd.grad({x}, [{y}])", "max({x}, {y})", "abs({x})", "-{x}", "~{x}", "{x} < {y}", "len({x})",
]
_OPS = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "reinterpret", "convert", "redistribute", "assert_type"]


@st.composite
def collective_calls(draw: st.DrawFn, x: str) -> str:
    """A typed collective with random, often wrong, arguments."""
    op = draw(st.sampled_from(_OPS))
    if op == "assert_type":
        entries = draw(st.lists(axis_entries(), max_size=3))
        return f"spmd.assert_type({', '.join([x, *entries])})"
    args = [x]
    if draw(st.integers(0, 5)):
        args.append(draw(axes | st.just("(dp, tp)") | st.just("(tp, tp)") | st.just("()")))
    for key in ("src", "dst"):
        if draw(st.integers(0, 4)):
            args.append(f"{key}={draw(letters)}")
    extra = draw(st.sampled_from(["", "expert_mode=True", "expert_mode=1", "expert_mode=flag", "op='avg'", "op='max'", "split_sizes=[1, 3]", "group=None", "bogus=1", "**{}"]))
    return f"spmd.{op}({', '.join(args + ([extra] if extra else []))})"


@st.composite
def expressions(draw: st.DrawFn, names: list[str]) -> str:
    x, y = draw(st.sampled_from(names)), draw(st.sampled_from(names))
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return f"{x} {draw(st.sampled_from(_BINOPS))} {draw(st.sampled_from([y, '2', '1.5', 'None']))}"
    if kind == 1:
        return f"{x}.{draw(st.sampled_from(_METHODS)).format(y=y)}"
    if kind == 2:
        return draw(st.sampled_from(_FUNCS)).format(x=x, y=y)
    return draw(collective_calls(x))


@st.composite
def statements(draw: st.DrawFn, names: list[str], depth: int = 0) -> list[str]:
    """A few lines of a function body (indented by the caller); new names join ``names``."""
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        target = f"v{len(names)}"
        kind = draw(st.integers(0, 5))
        if kind == 0 and depth < 2:
            # A branch joining two different values under one name: a union.
            then = draw(expressions(names))
            other = draw(expressions(names))
            lines += ["if flag:", f"    {target} = {then}", "else:", f"    {target} = {other}"]
        elif kind == 1:
            lines.append(f"{target}: {draw(tensor_annotations())} = {draw(expressions(names))}")
        elif kind == 2 and depth < 2:
            inner = draw(statements(list(names), depth + 1))
            lines += ["for _ in range(2):"] + [f"    {line}" for line in inner]
            lines.append(f"{target} = {names[-1]}")
        elif kind == 3:
            lines.append(f"{draw(st.sampled_from(names))} = {draw(expressions(names))}")
            continue
        else:
            lines.append(f"{target} = {draw(expressions(names))}")
        names.append(target)
    return lines


HEADER = """\
from typing import Any, Optional, Union, cast

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, MeshAxis, Tensor, V
from spmd_stubs.axes import cp, dp, ep, pp, tp


class edp(MeshAxis): ...


def unknown_fn(t):
    return t
"""


@st.composite
def functions(draw: st.DrawFn, index: int) -> str:
    """A function, partially typed: some parameters annotated, some not, maybe a return type."""
    params = []
    for i in range(draw(st.integers(1, 3))):
        annotation = draw(st.none() | tensor_annotations())
        params.append(f"a{i}" + (f": {annotation}" if annotation else ""))
    ret = draw(st.none() | tensor_annotations())
    body = draw(statements([f"a{i}" for i in range(len(params))]))
    result = draw(st.sampled_from(["a0", f"v{len(params)}" if body else "a0", "None"]))
    head = f"def f{index}({', '.join(params)}, flag: bool = True)" + (f" -> {ret}" if ret else "") + ":"
    # Names a branch or loop may not have bound are still defined for mypy.
    return "\n".join([head, *(f"    {line}" for line in body), f"    return {result}"])


@st.composite
def extras(draw: st.DrawFn) -> str:
    """Module-level constructs: aliases, casts, classes, modules with forward."""
    annotation = draw(tensor_annotations())
    return draw(
        st.sampled_from(
            [
                f"Alias = {annotation}\n\ndef uses_alias(x: Alias) -> Alias:\n    return x",
                f"def casts(x: torch.Tensor) -> None:\n    y = cast({annotation}, x)\n    y.sum().backward()",
                f"class Holder:\n    w: {annotation}\n\n    def get(self) -> {annotation}:\n        return self.w * 2",
                f"class Block(nn.Module):\n    def forward(self, x: {annotation}) -> {annotation}:\n        return x + x\n\n\ndef calls(b: Block, x: Tensor[R@tp]) -> None:\n    y = b(x)\n    z = b.forward(x)",
                f"x_global: {annotation}\ny_global = spmd.all_reduce(x_global, tp, src=P, dst=R)",
            ]
        )
    )


@st.composite
def modules(draw: st.DrawFn) -> str:
    """A module of random functions and constructs, kept only when it compiles."""
    parts = [HEADER]
    parts += [draw(functions(i)) for i in range(draw(st.integers(1, 4)))]
    parts += draw(st.lists(extras(), max_size=2))
    source = "\n\n\n".join(parts) + "\n"
    try:
        # Random constructs such as `1[0]` compile with a SyntaxWarning ("perhaps you missed a comma?"):
        # valid Python, and meant to be hostile; only this check of the generated text is silenced.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            compile(source, "<fuzz>", "exec")
    except SyntaxError:
        return HEADER  # rare; the header alone is still a valid module
    return source
