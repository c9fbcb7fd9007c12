"""``Tensor[R@tp, V@dp]`` and ``Tensor[R[tp], S[0, dp]]`` -> ``torch.Tensor`` with a hidden SPMD type.

mypy's parser keeps no operands of ``@`` inside a type expression (it leaves a
``RawExpressionType`` with a position), so the headline form is read back from
the source text (:func:`_entry_text`).  The canonical form arrives as ordinary
``UnboundType`` s.  Both forms resolve their
names through the module's scope: ``R`` must be ``spmd_stubs.R`` (any import
alias works) and ``tp`` a ``MeshAxis`` subclass, whose class name is the axis
name.

A malformed entry (unknown letter, unknown axis, axis twice, ``S`` without a
dim, ``S`` with a non-int dim, a form that cannot be read back) is an
``spmd-annotation`` error with the fix; the annotation then means unknown.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from typing import Callable, Union

from mypy.nodes import Expression, MypyFile, PlaceholderNode, RefExpr, SymbolNode, TupleExpr, TypeInfo
from mypy.plugin import AnalyzeTypeContext
from mypy.types import AnyType, RawExpressionType, Type, TypeOfAny, UnboundType

from spmd_mypy import report
from spmd_mypy.build_state import state_of
from spmd_mypy.fullnames import MESH_AXIS, SHARD, SHARDED, TENSOR
from spmd_mypy.representation import with_spmd
from spmd_mypy.sources import SourceFiles, SourceUnreadable
from spmd_stubs import core
from spmd_stubs.core import AxisType, Invariant, Partial, PartialOf, Replicate, Shard, TensorType, Varying
from spmd_stubs.core.axis_types import DuplicateAxisError, tensor_type_from

SHARDS = frozenset({SHARD, SHARDED})
"""``S[0, tp]`` and ``Sharded[Literal[0], tp]``: one meaning, two spellings."""
_LITERALS = frozenset({"typing.Literal", "typing_extensions.Literal"})
KINDS: dict[str, AxisType] = {
    "spmd_stubs.types.R": Replicate,
    "spmd_stubs.types.I": Invariant,
    "spmd_stubs.types.V": Varying,
    "spmd_stubs.types.P": Partial,
    "spmd_stubs.types.Pavg": PartialOf("avg"),
    "spmd_stubs.types.Pmax": PartialOf("max"),
    "spmd_stubs.types.Pmin": PartialOf("min"),
}
_CANONICAL_HINT = "write the canonical form instead, e.g. Tensor[R[tp], S[0, dp]]"


class AnnotationError(ValueError):
    """A malformed SPMD annotation; the message ends with the fix."""


class Deferred(Exception):
    """A name is not analysed yet: mypy must come back to this annotation."""


@dataclass(frozen=True)
class Missing:
    """``S`` written without a dim."""


DimText = Union[int, str, Missing]
"""An S dim as written: the int, the offending text, or Missing."""

Lookup = Callable[[str], Union[SymbolNode, None]]
"""Resolves a dotted name as written in the module to its definition."""


# --------------------------------------------------------------------------
# Resolution shared by both spellings (and by value-level ``R@tp`` in calls)
# --------------------------------------------------------------------------


def axis_type_of(node: SymbolNode | None, written: str, dim: DimText | None) -> AxisType:
    """The SPMD type named by ``node`` (``R``..``P``, or ``S`` with ``dim``)."""
    fullname = getattr(node, "fullname", None)
    if fullname in SHARDS:
        return _shard(dim, written, "S" if fullname == SHARD else "Sharded")
    if fullname in KINDS and dim is None:
        return KINDS[fullname]
    raise AnnotationError(
        f"unknown SPMD type {written!r}: write one of R, I, V, P, Pavg, Pmax, Pmin or S(dim) before the axis, "
        "e.g. R@tp or S(0)@tp"
    )


def _shard(dim: DimText | None, written: str, kind: str) -> AxisType:
    """``kind`` (``S`` or ``Sharded``, as resolved, whatever name it was imported as) with ``dim``."""
    example = ("Sharded[Literal[0], tp] or Sharded[Literal[-1], tp]" if kind == "Sharded"
               else "S(0)@tp or S(-1)@tp (canonical S[0, tp])")
    if dim is None or isinstance(dim, Missing):
        raise AnnotationError(f"{written!r}: {kind} needs the sharded tensor dim, e.g. {example}")
    if isinstance(dim, str):
        raise AnnotationError(f"{kind} takes an int tensor dim, got {dim!r}: write e.g. {example}")
    return Shard(dim)


def axis_name_of(node: SymbolNode | None, written: str) -> str:
    """The mesh axis a name refers to: a ``MeshAxis`` subclass, named by its class name."""
    if isinstance(node, TypeInfo) and node.fullname != MESH_AXIS and node.has_base(MESH_AXIS):
        return node.name
    name = written.rpartition(".")[2]
    declare = f"`class {name}(MeshAxis): ...`" if name.isidentifier() else "`class NAME(MeshAxis): ...`"
    raise AnnotationError(
        f"{written!r} is not a mesh axis: import one from spmd_stubs.axes (dp, tp, cp, ep, pp) or declare it with "
        f"{declare}"
    )


def shard_group(axis_type: AxisType, axes: list[str], written: str) -> list[tuple[str, AxisType]]:
    """:func:`spmd_stubs.core.shard_group`, its error an annotation error quoting ``written``."""
    try:
        return core.shard_group(axis_type, axes)
    except ValueError as error:
        raise AnnotationError(f"{written!r}: {error}") from None


def axes_of(expr: Expression) -> tuple[str, ...] | None:
    """``tp`` -> ("tp",), ``(dp, cp)`` -> ("dp", "cp"); None when not a static axis."""
    if isinstance(expr, TupleExpr):
        parts = [axes_of(item) for item in expr.items]
        if not parts or any(p is None for p in parts):
            return None
        return tuple(axis for part in parts for axis in part)  # type: ignore[union-attr]
    if isinstance(expr, RefExpr) and isinstance(expr.node, TypeInfo):
        return (axis_name_of(expr.node, expr.node.name),)
    return None


def tensor_type_of(entries: list[tuple[str, AxisType]]) -> TensorType:
    """:func:`spmd_stubs.core.axis_types.tensor_type_from`, an axis given twice an annotation error."""
    try:
        return tensor_type_from(entries)
    except DuplicateAxisError as error:
        raise AnnotationError(str(error)) from error


# --------------------------------------------------------------------------
# The headline form, read back from source
# --------------------------------------------------------------------------

def _entry_text(sources: SourceFiles, module: MypyFile, tensor: UnboundType, index: int) -> str:
    """The source text of ``tensor``'s ``index``-th argument, a ``TYPE@axis`` entry of ``Tensor[...]``.

    mypy's native parser gives the entry's start and end.  Its old parser
    (``--no-native-parser``, the default before mypy 2.4) gives no end and
    places the entry on the annotation's first line, so the entry is the
    item of the ``Tensor[...]`` that ends where mypy ends it
    (:meth:`~spmd_mypy.sources.SourceFiles.subscript_items`).
    """
    entry = tensor.args[index]
    try:
        if entry.end_line is not None and entry.end_column is not None:
            return sources.text_of(module, entry)
        items = sources.subscript_items(module, tensor)
    except SourceUnreadable as error:
        raise AnnotationError(f"cannot read this SPMD type back from source ({error}); {_CANONICAL_HINT}") from None
    if len(items) != len(tensor.args):
        raise AnnotationError(f"cannot read this SPMD type back from source; {_CANONICAL_HINT}")
    return items[index]


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _int_constant(node: ast.expr) -> int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _int_constant(node.operand)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


@dataclass(frozen=True)
class _AtForm:
    """The names a ``TYPE@axis`` entry spells, before they are resolved in the module's scope."""

    kind: str
    dim: DimText | None
    axes: tuple[str, ...]


def parse_at_form(text: str, lookup: Lookup) -> list[tuple[str, AxisType]]:
    """``"S(-1)@tp"`` -> ``[("tp", S(-1))]``, ``"S(0)@(dp, tp)"`` -> both axes in order."""
    written = _at_form(text.strip())
    kind = lookup(written.kind)
    axis_type = axis_type_of(kind, written.kind, _missing_dim(kind, written.dim))
    axes = [axis_name_of(lookup(axis), axis) for axis in written.axes]
    return shard_group(axis_type, axes, text.strip())


@functools.lru_cache(maxsize=1024)
def _at_form(text: str) -> _AtForm:
    """The syntax of one entry (raises AnnotationError).

    Cached: a code base spells the same few entries in every signature, and
    parsing one with :mod:`ast` costs more than resolving its names.
    """
    try:
        tree = ast.parse(f"({text})", mode="eval").body
    except SyntaxError:
        tree = None
    if not (isinstance(tree, ast.BinOp) and isinstance(tree.op, ast.MatMult)):
        raise AnnotationError(f"expected TYPE@axis such as R@tp, got {text!r}; {_CANONICAL_HINT}")
    left, dim = tree.left, None
    if isinstance(left, ast.Call):
        dim = _call_dim(left)
        left = left.func
    kind_name = _dotted(left)
    written_axes = tree.right.elts if isinstance(tree.right, ast.Tuple) else [tree.right]
    axes_written = [_dotted(axis) for axis in written_axes]
    if kind_name is None:
        raise AnnotationError(f"unknown SPMD type {ast.unparse(left)!r}: write one of R, I, V, P or S(dim)")
    if not axes_written or None in axes_written:
        raise AnnotationError(f"{ast.unparse(tree.right)!r} is not a mesh axis: write e.g. R@tp")
    return _AtForm(kind_name, dim, tuple(axes_written))  # type: ignore[arg-type]


def _missing_dim(kind: SymbolNode | None, dim: DimText | None) -> DimText | None:
    """``S@tp`` (no call) is S without a dim; ``R@tp`` has none to give."""
    if dim is None and getattr(kind, "fullname", None) in SHARDS:
        return Missing()
    return dim


def _call_dim(call: ast.Call) -> DimText:
    if len(call.args) != 1 or call.keywords:
        return Missing() if not call.args else ast.unparse(call)
    value = _int_constant(call.args[0])
    return ast.unparse(call.args[0]) if value is None else value


# --------------------------------------------------------------------------
# The canonical form: R[tp], S[0, tp]
# --------------------------------------------------------------------------


def parse_canonical(entry: UnboundType, lookup: Lookup) -> list[tuple[str, AxisType]]:
    """``R[tp]`` / ``S[0, tp]`` -> ``[(axis, type)]``; ``S[0, dp, tp]`` -> both axes in order."""
    kind = lookup(entry.name)
    args = list(entry.args)
    dim: DimText | None = None
    shard = getattr(kind, "fullname", None) in SHARDS
    if shard:
        dim = _canonical_dim(args[0], lookup) if len(args) >= 2 else Missing()
        args = args[1:]
    if not args or (len(args) > 1 and not shard) or any(not isinstance(a, UnboundType) or a.args for a in args):
        axis_type_of(kind, entry.name, dim)  # an unknown letter is the better message
        raise AnnotationError(
            f"expected {entry.name}[axis] (or S[dim, axis, ...]) such as R[tp], got {entry.name}[...] "
            f"with {len(entry.args)} argument(s)"
        )
    axis_type = axis_type_of(kind, entry.name, dim)
    axes = [axis_name_of(lookup(a.name), a.name) for a in args if isinstance(a, UnboundType)]
    return shard_group(axis_type, axes, entry.name)


def _canonical_dim(arg: Type, lookup: Lookup) -> DimText:
    """``0`` (``S[0, tp]``) or ``Literal[0]`` (``Sharded[Literal[0], tp]``) -> 0."""
    if isinstance(arg, UnboundType) and len(arg.args) == 1 and getattr(lookup(arg.name), "fullname", None) in _LITERALS:
        arg = arg.args[0]
    if isinstance(arg, RawExpressionType) and type(arg.literal_value) is int:
        return arg.literal_value
    if isinstance(arg, UnboundType):
        return arg.name
    return str(arg)


# --------------------------------------------------------------------------
# The type-analyze hook
# --------------------------------------------------------------------------


def analyze_spmd_tensor(ctx: AnalyzeTypeContext) -> Type:
    """Type-analyze hook for ``spmd_stubs.Tensor[...]``: a ``torch.Tensor`` with the SPMD type."""
    tensor = ctx.api.named_type(TENSOR, [])
    if not ctx.type.args:
        return tensor
    try:
        tensor_type = tensor_type_of([entry for index in range(len(ctx.type.args)) for entry in _entries(ctx, index)])
    except Deferred:
        ctx.api.api.defer()  # type: ignore[attr-defined]
        return tensor
    except AnnotationError as error:
        report.fail_in_annotation(ctx.api, ctx.context, f"Bad SPMD annotation: {error}")
        return tensor
    return with_spmd(ctx.api, tensor, tensor_type)


def _entries(ctx: AnalyzeTypeContext, index: int) -> list[tuple[str, AxisType]]:
    """The entries of ``Tensor[...]``'s ``index``-th argument."""
    arg, lookup = ctx.type.args[index], _lookup(ctx)
    if isinstance(arg, RawExpressionType) and arg.literal_value is None:
        return parse_at_form(_entry_text(state_of(ctx.api).sources, _module(ctx), ctx.type, index), lookup)
    if isinstance(arg, UnboundType):
        return parse_canonical(arg, lookup)
    raise AnnotationError(f"expected TYPE@axis such as R@tp, got {arg}")


def _module(ctx: AnalyzeTypeContext) -> MypyFile:
    return ctx.api.api.cur_mod_node  # type: ignore[attr-defined, no-any-return]


def _lookup(ctx: AnalyzeTypeContext) -> Lookup:
    def lookup(name: str) -> SymbolNode | None:
        symbol = ctx.api.lookup_qualified(name, ctx.context, suppress_errors=True)  # type: ignore[attr-defined]
        node = None if symbol is None else symbol.node
        if isinstance(node, PlaceholderNode):
            raise Deferred(name)
        return node

    return lookup


def shard_outside_tensor(ctx: AnalyzeTypeContext) -> Type:
    """``S[0, tp]`` analysed on its own: only in an alias's value (``A = Tensor[S[0, tp]]``).

    mypy analyses that value as an expression first; ``S`` is no generic
    class, so without this hook it would reject ``S[0, tp]``.  The alias's
    type itself comes from :func:`analyze_spmd_tensor`.  A bare ``S`` is
    the class, as in ``src: S``.
    """
    if not ctx.type.args:
        return ctx.api.named_type(SHARD, [])
    return AnyType(TypeOfAny.special_form)
