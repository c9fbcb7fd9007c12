"""A DTensor ``local_map`` call's placements, as written, and the SPMD types they give (docs/spec.md#dtensors-local_map).

A placement list is read where written out: ``[Replicate()]``,
``(Shard(0),)``, ``[Partial()]`` (a sum), ``None`` for a non-tensor leaf.
``out_placements`` is one such list or a tuple of them.  The mesh dims are
the axes ``device_mesh`` names (``mesh["tp"]``, ``mesh["dp", "tp"]``,
``tp_mesh``), else ``[spmd_mypy] current_mesh`` where it has one axis per
dim.  A list held in a name, a placement with a run-time argument or another
reduction, or a mesh of unknown axes is not read: its leaf (or, for the axes
and ``in_placements``, the whole region) stays unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from mypy.nodes import (
    Expression,
    IndexExpr,
    ListExpr,
    MemberExpr,
    NameExpr,
    StrExpr,
    TupleExpr,
)
from mypy.types import Type

from spmd_mypy.placement_literals import placement_written
from spmd_stubs.core import TensorType
from spmd_stubs.core.local_regions import default_gradient, region_input_type, region_output_type
from spmd_stubs.core.parallel_styles import Placement

Placements = tuple[Placement, ...]
"""One tensor's placements, one per mesh dim."""


class Pair(NamedTuple):
    """An input's placement on one mesh dim and the one its gradient is read as."""

    input: int
    dim: int
    forward: Placement
    gradient: Placement


@dataclass(frozen=True)
class Leaf:
    """One flattened input or output: its placements (None: not a tensor) and, for an input, those its
    gradient is read as (None: left out, DTensor's default)."""

    placements: Placements | None
    gradient: Placements | None = None

    def gradients(self) -> Placements:
        """The gradient placements as DTensor reads them, defaults filled in."""
        assert self.placements is not None
        return self.gradient or tuple(map(default_gradient, self.placements))

    def read_as(self, dim: int) -> str:
        """How its gradient placement on ``dim`` came to be, in words."""
        left_out = " (in_grad_placements left out)" if self.gradient is None else ""
        return f"its gradient read as {self.gradients()[dim]}{left_out}"

    def shown(self) -> str:
        """Its entry of ``in_grad_placements``, defaults written out."""
        return "None" if self.placements is None else "[" + ", ".join(map(str, self.gradients())) + "]"


@dataclass(frozen=True)
class Region:
    """A ``local_map`` call's placements on ``axes`` (one per mesh dim); None for a leaf not read."""

    axes: tuple[str, ...]
    inputs: tuple[Leaf | None, ...]
    outputs: tuple[Leaf | None, ...] | None
    """None: ``out_placements`` not read; one leaf, or several (a tuple result) where ``several``."""
    several: bool

    def read(self) -> bool:
        """Whether every placement list is read."""
        return all(self.inputs) and self.outputs is not None and all(self.outputs)

    def input_type(self, index: int) -> TensorType | None:
        """Input ``index``'s type on the axes whose pair has one (None: not a tensor, or not read)."""
        leaf = self.inputs[index]
        if leaf is None or leaf.placements is None:
            return None
        pairs = zip(self.axes, leaf.placements, leaf.gradients())
        typed = {axis: region_input_type(forward, gradient) for axis, forward, gradient in pairs}
        return TensorType.of({axis: t for axis, t in typed.items() if t is not None})

    def untyped(self) -> list[Pair]:
        """The inputs' placement pairs that are none of our types."""
        return [Pair(index, dim, forward, gradient) for index, leaf in enumerate(self.inputs)
                if leaf is not None and leaf.placements is not None
                for dim, (forward, gradient) in enumerate(zip(leaf.placements, leaf.gradients()))
                if region_input_type(forward, gradient) is None]

    def output_types(self) -> list[TensorType | None] | None:
        """Each result's type (None: not a tensor, or not read); None where ``out_placements`` is not read."""
        if self.outputs is None:
            return None
        return [TensorType.of({axis: region_output_type(p) for axis, p in zip(self.axes, leaf.placements)})
                if leaf is not None and leaf.placements is not None else None for leaf in self.outputs]

    def with_gradient(self, index: int, dim: int, gradient: Placement) -> Region:
        """This region with input ``index``'s gradient read as ``gradient`` on ``dim``."""
        leaf = self.inputs[index]
        assert leaf is not None
        changed = list(leaf.gradients())
        changed[dim] = gradient
        inputs = list(self.inputs)
        inputs[index] = replace(leaf, gradient=tuple(changed))
        return replace(self, inputs=tuple(inputs))

    def gradient_fix(self, index: int) -> str:
        """``in_grad_placements=...`` written out for every input; where one is not read, input ``index``'s
        entry."""
        every = self.gradient_placements()
        if every is None:
            leaf = self.inputs[index]
            return f"in_grad_placements entry {index}: {leaf.shown() if leaf is not None else '...'}"
        return f"in_grad_placements={every}"

    def gradient_placements(self) -> str | None:
        """Every input's gradient placements as one ``in_grad_placements`` value; None where one is not read."""
        shown = [leaf.shown() for leaf in self.inputs if leaf is not None]
        if len(shown) < len(self.inputs):
            return None
        return f"({', '.join(shown)}{',' if len(shown) == 1 else ''})"


def read_region(args: dict[str, tuple[Expression, Type]], current_mesh: tuple[str, ...]) -> Region | None:
    """The call's region; None where ``in_placements`` or the mesh axes are not read."""
    if "in_placements" not in args or not isinstance(args["in_placements"][0], (TupleExpr, ListExpr)):
        return None
    forward = [_placements(item) for item in args["in_placements"][0].items]
    gradients: list[Placements | None | bool] = [None] * len(forward)
    written = args["in_grad_placements"][0] if "in_grad_placements" in args else None
    if written is not None and not _is_none(written):
        if not isinstance(written, (TupleExpr, ListExpr)) or len(written.items) != len(forward):
            return None
        gradients = [_placements(item) for item in written.items]
    outputs, several = _outputs(args["out_placements"][0]) if "out_placements" in args else (None, False)
    dims = {len(p) for p in [*forward, *gradients, *(leaf.placements for leaf in outputs or () if leaf)]
            if isinstance(p, tuple)}
    axes = _mesh_axes(args["device_mesh"][0] if "device_mesh" in args else None, dims, current_mesh)
    if axes is None:
        return None
    return Region(axes, tuple(_input(f, g) for f, g in zip(forward, gradients)), outputs, several)


def _input(forward: Placements | None | bool, gradient: Placements | None | bool) -> Leaf | None:
    """An input's leaf; None where its placements (or a tensor's gradient placements) are not read."""
    if forward is None:
        return Leaf(None)
    if isinstance(forward, tuple) and (gradient is None or isinstance(gradient, tuple)):
        return Leaf(forward, gradient)
    return None


def _placements(expr: Expression) -> Placements | None | bool:
    """A placement list: its placements, None for ``None`` (not a tensor), False where not read."""
    if _is_none(expr):
        return None
    if not isinstance(expr, (TupleExpr, ListExpr)) or not expr.items:
        return False
    read = [placement_written(item) for item in expr.items]
    return tuple(p for p in read if p is not None) if all(read) else False


def _outputs(expr: Expression) -> tuple[tuple[Leaf | None, ...] | None, bool]:
    """``out_placements``: one placement list (or ``None``), or a tuple of them; None where not read."""
    single = _placements(expr)
    if single is not False:
        return (Leaf(single if isinstance(single, tuple) else None),), False
    if not isinstance(expr, TupleExpr):
        return None, False
    items = [_placements(item) for item in expr.items]
    return tuple(Leaf(item if isinstance(item, tuple) else None) if item is not False else None for item in items), True


def _mesh_axes(mesh: Expression | None, dims: set[int], current_mesh: tuple[str, ...]) -> tuple[str, ...] | None:
    """The axes of the mesh's dims; None where they are not known or the placement lists disagree on the
    count."""
    if len(dims) != 1:
        return None
    axes: tuple[str, ...] | None = current_mesh
    if isinstance(mesh, IndexExpr):
        index = mesh.index.items if isinstance(mesh.index, TupleExpr) else [mesh.index]
        axes = tuple(i.value for i in index if isinstance(i, StrExpr))
        axes = axes if len(axes) == len(index) else None
    elif isinstance(mesh, (NameExpr, MemberExpr)) and mesh.name.endswith("_mesh") and mesh.name != "_mesh":
        axes = (mesh.name[: -len("_mesh")],)
    return axes if axes is not None and len(axes) in dims else None


def _is_none(expr: Expression) -> bool:
    return isinstance(expr, NameExpr) and expr.fullname == "builtins.None"
