"""The three spellings of an SPMD annotation, and which one a module is written in.

* ``Tensor[R@tp, S(0)@dp]``: the headline form (mypy with the plugin only);
* ``Tensor[R[tp], S[0, dp]]``: the canonical form (pyright reads it too);
* ``Tensor[R[tp], Sharded[Literal[0], dp]]``: the portable form, which every
  type checker reads (docs/checker.md#pyright-basedpyright-pyrefly-ty).

An annotation the codemod writes into a module is spelled the way the
module's own ``Tensor[...]`` annotations are, so that a module kept readable
by pyright or ty stays so (:func:`spelling_of`).
"""

from __future__ import annotations

import enum

import libcst as cst

from spmd_stubs.core import TensorType

__all__ = ["Spelling", "spelling_of", "spelled", "imports_of"]


class Spelling(enum.Enum):
    AT = "Tensor[S(0)@tp]"
    CANONICAL = "Tensor[S[0, tp]]"
    PORTABLE = "Tensor[Sharded[Literal[0], tp]]"

    def in_expression(self) -> "Spelling":
        """The spelling outside an annotation (a type alias): the ``@`` form is read from annotations only."""
        return Spelling.CANONICAL if self is Spelling.AT else self


def _entries(tensor: TensorType, spelling: Spelling) -> list[str]:
    """``R[tp]``, ``S[0, dp, tp]`` or ``Sharded[Literal[0], dp, tp]`` per axis (axes sharding one dim in order, together)."""
    entries: list[str] = []
    written: set[str] = set()
    kinds = tensor.as_dict()
    for axis, axis_type in tensor.axes:
        if axis in written:
            continue
        if axis_type.shard is None:
            entries.append(f"{axis_type}[{axis}]")
            continue
        group = [axis] if axis_type.order is None else [
            a for a in tensor.shard_axes(axis_type.shard) if kinds[a].order is not None]
        written.update(group)
        dim = str(axis_type.shard) if spelling is Spelling.CANONICAL else f"Literal[{axis_type.shard}]"
        entries.append(f"{'S' if spelling is Spelling.CANONICAL else 'Sharded'}[{', '.join([dim, *group])}]")
    return entries


def spelled(tensor: TensorType, spelling: Spelling) -> str:
    """``Tensor[...]`` of ``tensor`` in ``spelling``."""
    if spelling is Spelling.AT:
        return f"Tensor[{tensor}]"
    return f"Tensor[{', '.join(_entries(tensor, spelling))}]"


def imports_of(tensor: TensorType, spelling: Spelling) -> set[tuple[str, str]]:
    """The ``(module, name)`` pairs ``spelled(tensor, spelling)`` needs imported."""
    needed = {("spmd_stubs", "Tensor")}
    for axis, axis_type in tensor.axes:
        needed.add(("spmd_stubs.axes", axis))
        if axis_type.shard is None:
            needed.add(("spmd_stubs", str(axis_type)))
        elif spelling is Spelling.PORTABLE:
            needed |= {("spmd_stubs", "Sharded"), ("typing", "Literal")}
        else:
            needed.add(("spmd_stubs", "S"))
    return needed


def _name(node: cst.BaseExpression) -> str:
    """``Tensor`` for ``Tensor`` and for ``spmd_stubs.Tensor``; "" for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    return node.attr.value if isinstance(node, cst.Attribute) else ""


class _Entries(cst.CSTVisitor):
    """Counts the entries of the ``Tensor[...]`` annotations of a module by how they are spelled."""

    def __init__(self) -> None:
        super().__init__()
        self.at = self.bracketed = self.shards_as_s = self.shards_as_sharded = 0
        self._annotations = 0

    def visit_Annotation(self, node: cst.Annotation) -> None:
        self._annotations += 1

    def leave_Annotation(self, original_node: cst.Annotation) -> None:
        self._annotations -= 1

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if not self._annotations or _name(node.value) != "Tensor":
            return
        for element in node.slice:
            entry = element.slice.value if isinstance(element.slice, cst.Index) else None
            if isinstance(entry, cst.BinaryOperation) and isinstance(entry.operator, cst.MatrixMultiply):
                self.at += 1
            elif isinstance(entry, cst.Subscript):
                self.bracketed += 1
                self.shards_as_s += _name(entry.value) == "S"
                self.shards_as_sharded += _name(entry.value) == "Sharded"


def spelling_of(module: cst.Module) -> Spelling:
    """How the module's ``Tensor[...]`` annotations are spelled, most of their entries deciding.

    A module that writes ``R[tp]`` is portable unless it writes its shards
    ``S[0, tp]`` and never ``Sharded[...]``; a module with no entries in
    brackets (none at all included) gets the headline ``@`` form.
    """
    entries = _Entries()
    module.visit(entries)
    if entries.bracketed <= entries.at:
        return Spelling.AT
    return Spelling.CANONICAL if entries.shards_as_s and not entries.shards_as_sharded else Spelling.PORTABLE
