"""The annotation vocabulary: ``Tensor[R@tp, V@dp]`` and friends.

Everything here is erasable.  At runtime ``Tensor[...]`` *is*
``torch.Tensor``, so ``typing.get_type_hints``, ``inspect.signature`` and
``torch.compile`` see ordinary tensors; the SPMD meaning exists only for the
type checker (``spmd_mypy``).

Three spellings mean the same type::

    Tensor[R@tp, V@dp, S(0)@cp]                  # the headline form
    Tensor[R[tp], V[dp], S[0, cp]]               # canonical: aliases, cast()
    Tensor[R[tp], V[dp], Sharded[Literal[0], cp]]  # portable: every type checker

The canonical form is the one to use where the ``@`` form cannot be read back
from source: type aliases, ``typing.cast`` and quoted annotations.  The
portable one is for code bases that also run pyright, basedpyright, pyrefly
or ty, which read ``Tensor[...]`` as ``torch.Tensor`` (docs/checker.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, Union, get_args

from typing_extensions import TypeVarTuple, Unpack

from spmd_stubs import core
from spmd_stubs.core.axis_types import tensor_type_from

__all__ = [
    "MeshAxis",
    "R",
    "I",
    "V",
    "P",
    "Pavg",
    "Pmax",
    "Pmin",
    "S",
    "Sharded",
    "Tensor",
    "Group",
    "tensor_type_of",
    "AxisAnnotation",
    "SpmdTypeLike",
    "assert_type",
]

_Axis = TypeVar("_Axis")
_Dim = TypeVar("_Dim")
_AxisTypes = TypeVarTuple("_AxisTypes")
_Axes = TypeVarTuple("_Axes")


class MeshAxis:
    """Subclass to declare a mesh axis; the class name is the axis name.

    ``class edp(MeshAxis): ...`` declares the axis ``edp``.  At runtime the
    axis is bound to a process group by :func:`spmd_stubs.bind_mesh` (by
    ``mesh_dim_names``) or :func:`spmd_stubs.bind_groups`.
    """

    axis_name: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.axis_name = cls.__name__


def axis_name(axis: type[MeshAxis]) -> str:
    """The name of a ``MeshAxis`` subclass (its class name)."""
    if isinstance(axis, type) and issubclass(axis, MeshAxis) and axis is not MeshAxis:
        return axis.axis_name
    raise TypeError(
        f"expected a mesh axis (a MeshAxis subclass such as tp), got {axis!r}; "
        "declare one with `class myaxis(MeshAxis): ...`"
    )


AxisGroup = Union[type[MeshAxis], tuple[type[MeshAxis], ...]]
"""One axis, or (after a shard only) the axes sharding one dim, major first."""


class AxisAnnotation:
    """``R@tp`` at runtime: one axis's type, as written in an annotation.

    ``S(0)@(dp, tp)`` keeps the tuple: dim 0 is sharded over dp, then tp.
    """

    __slots__ = ("axis", "type")

    def __init__(self, axis_type: core.AxisType, axis: AxisGroup) -> None:
        if isinstance(axis, tuple) and axis_type.shard is None:
            raise TypeError(f"only a shard S(dim) spans several axes, got {axis_type}@{axis!r}")
        self.type = axis_type
        self.axis = axis

    def entries(self) -> list[tuple[str, core.AxisType]]:
        """``(axis name, type)`` per axis, shards of a group with their order."""
        axes = self.axis if isinstance(self.axis, tuple) else (self.axis,)
        return core.shard_group(self.type, [axis_name(a) for a in axes])

    def __repr__(self) -> str:
        return str(core.TensorType.of(dict(self.entries())))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, AxisAnnotation)
            and (self.type, self.axis) == (other.type, other.axis)
        )

    def __hash__(self) -> int:
        return hash((self.type, self.axis))


class _LocalTypeMeta(type):
    """Lets the classes ``R, I, V, P`` be written ``R@tp`` in annotations."""

    spmd_type: core.AxisType

    def __matmul__(cls, axis: type[MeshAxis]) -> AxisAnnotation:
        return AxisAnnotation(cls.spmd_type, axis)

    def __repr__(cls) -> str:
        return str(cls.spmd_type)


class R(Generic[_Axis], metaclass=_LocalTypeMeta):
    """Replicate: the same value on every rank, gradient Partial."""

    spmd_type = core.Replicate


class I(Generic[_Axis], metaclass=_LocalTypeMeta):  # noqa: E742 -- the spec's name (docs/spec.md#types)
    """Invariant: the same value on every rank, gradient Invariant."""

    spmd_type = core.Invariant


class V(Generic[_Axis], metaclass=_LocalTypeMeta):
    """Varying: a different value on each rank, gradient Varying."""

    spmd_type = core.Varying


class P(Generic[_Axis], metaclass=_LocalTypeMeta):
    """Partial: per-rank parts of a pending sum, gradient Replicate."""

    spmd_type = core.Partial


class Pavg(Generic[_Axis], metaclass=_LocalTypeMeta):
    """Partial pending an average: the value is the mean of the ranks' parts.

    Unlike a pending sum, a replicated term may be added (``avg(x_r + c) =
    avg(x_r) + c``); gradient Replicate (``g / n`` on every rank).
    """

    spmd_type = core.PartialOf("avg")


class Pmax(Generic[_Axis], metaclass=_LocalTypeMeta):
    """Partial pending a maximum: the value is the elementwise max of the ranks' parts.

    Only data movement and ops monotone in it keep it (docs/spec.md#pending-reductions); gradient
    Varying (the rank attaining the max gets it).
    """

    spmd_type = core.PartialOf("max")


class Pmin(Generic[_Axis], metaclass=_LocalTypeMeta):
    """Partial pending a minimum: the mirror of :class:`Pmax`."""

    spmd_type = core.PartialOf("min")


class S:
    """Shard: ``S(i)`` is V whose global meaning is ``cat(parts, dim=i)``.

    ``S(0)@tp`` in an annotation, ``src=S(-1)`` in a collective,
    ``S[0, tp]`` in the canonical annotation form.  ``S(0)@(dp, tp)``
    (canonical ``S[0, dp, tp]``) shards dim 0 over dp and each part over tp.
    """

    __slots__ = ("dim", "spmd_type")
    dim: int
    spmd_type: core.AxisType

    def __new__(cls, dim: int) -> S:
        """One object per dim: ``S(0)`` written in a call costs a dict lookup,
        and comparing and hashing it (as every typed call's site lookup does)
        is by identity, in C."""
        shard = _SHARDS.get(dim) if type(dim) is int else None
        return shard if shard is not None else cls._first(dim)

    @classmethod
    def _first(cls, dim: int) -> S:
        """``S(dim)`` for a dim not seen yet, or not given as a plain int (an ``IntEnum``)."""
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"S(dim) takes an int tensor dim, got {dim!r}")
        dim = int(dim)
        if dim not in _SHARDS:
            shard = _SHARDS[dim] = super().__new__(cls)
            shard.dim, shard.spmd_type = dim, core.Shard(dim)
        return _SHARDS[dim]

    def __reduce__(self) -> tuple[type[S], tuple[int]]:
        return S, (self.dim,)

    def __matmul__(self, axis: AxisGroup) -> AxisAnnotation:
        return AxisAnnotation(self.spmd_type, axis)

    def __class_getitem__(cls, params: Any) -> Any:
        dim, *axes = params
        return AxisAnnotation(core.Shard(dim), axes[0] if len(axes) == 1 else tuple(axes))

    def __repr__(self) -> str:
        return f"S({self.dim})"


_SHARDS: dict[int, S] = {}
"""``S(dim)`` by dim."""


class Sharded(Generic[_Dim, Unpack[_Axes]]):
    """``Sharded[Literal[0], tp]``: ``S[0, tp]`` in a spelling every type checker reads.

    An int is no type expression, so pyright, basedpyright and pyrefly read
    ``S[0, tp]`` as a bare ``S`` and ty rejects it; ``Literal[0]`` is one.
    ``Sharded[Literal[0], dp, tp]`` is ``S(0)@(dp, tp)``.  Annotations only:
    collectives take ``S(0)``.
    """

    def __class_getitem__(cls, params: Any) -> Any:
        dim, *axes = params
        return S.__class_getitem__((*get_args(dim), *axes))


SpmdTypeLike = Union[_LocalTypeMeta, S]
"""What ``src=``/``dst=`` accept: one of the classes R, I, V, P, Pavg, Pmax, Pmin or an ``S(i)``."""


def tensor_type_of(annotations: Any) -> core.TensorType:
    """``(S(0)@(dp, tp), R@cp)`` -> the :class:`~spmd_stubs.core.TensorType` it spells.

    ``TypeError`` for an entry that is not ``TYPE@axis``;
    :class:`~spmd_stubs.core.axis_types.DuplicateAxisError` (a ``ValueError``)
    for an axis given twice.
    """
    return tensor_type_from(entry for annotation in annotations for entry in _checked(annotation).entries())


def _checked(annotation: object) -> AxisAnnotation:
    if not isinstance(annotation, AxisAnnotation):
        raise TypeError(f"expected TYPE@axis entries such as R@tp or S(0)@(dp, tp), got {annotation!r}")
    return annotation


def to_axis_type(value: Any) -> core.AxisType:
    """``R`` / ``S(0)`` (as passed to ``src=``/``dst=``) -> the algebra's type."""
    if isinstance(value, S):
        return value.spmd_type
    if isinstance(value, _LocalTypeMeta):
        return value.spmd_type
    raise TypeError(f"expected one of R, I, V, P, Pavg, Pmax, Pmin or S(dim) as src/dst, got {value!r}")


if TYPE_CHECKING:
    import torch
    from typing_extensions import TypeAliasType

    # A type checker without the plugin (plain mypy, pyright, basedpyright,
    # pyrefly, ty) reads ``Tensor[...]`` as ``torch.Tensor`` itself, not a
    # subclass: a plain tensor, a parameter, an op's or a collective's result
    # then flows into a typed annotation as it does at runtime.  The plugin
    # gives the alias its SPMD meaning by its full name (spmd_mypy.annotations).
    Tensor = TypeAliasType("Tensor", torch.Tensor, type_params=(_AxisTypes,))

else:

    class _ErasedTensorMeta(type):
        def __getitem__(cls, params: Any) -> Any:
            import torch

            return torch.Tensor

        def __instancecheck__(cls, instance: Any) -> bool:
            import torch

            return isinstance(instance, torch.Tensor)

        def __subclasscheck__(cls, subclass: Any) -> bool:
            import torch

            return issubclass(subclass, torch.Tensor)

    class Tensor(metaclass=_ErasedTensorMeta):
        """A ``torch.Tensor`` with an SPMD type per mesh axis.

        ``Tensor[...]`` evaluates to ``torch.Tensor``; instances are plain
        tensors.
        """


if TYPE_CHECKING:
    from torch.distributed import ProcessGroup

    # Without the plugin ``Group[tp]`` is ``ProcessGroup`` itself; the plugin
    # gives the alias its axis by its full name (spmd_mypy.group_types).
    Group = TypeAliasType("Group", ProcessGroup, type_params=(_Axis,))

else:

    class _ErasedGroupMeta(type):
        def __getitem__(cls, axis: Any) -> Any:
            from torch.distributed import ProcessGroup

            axis_name(axis)
            return ProcessGroup

    class Group(metaclass=_ErasedGroupMeta):
        """A ``torch.distributed.ProcessGroup`` over one mesh axis: ``group: Group[tp]``.

        ``Group[tp]`` evaluates to ``ProcessGroup`` (after checking that
        ``tp`` is a mesh axis); the checker reads a raw collective's
        ``group=`` of this type as a collective on ``tp``.
        """


_T = TypeVar("_T")


def assert_type(x: _T, *axis_types: Any) -> _T:
    """Return ``x``, declaring (or checking) its SPMD type.

    ``x = assert_type(x, V@dp, I@tp)`` refines an unknown tensor for the
    checker, and is an ``spmd-assert`` error where x's known type differs.
    At runtime it only checks that the arguments are ``TYPE@axis`` forms.
    """
    for annotation in axis_types:
        if not isinstance(annotation, AxisAnnotation):
            raise TypeError(f"assert_type takes TYPE@axis arguments such as R@tp, got {annotation!r}")
    return x
