"""How an SPMD type lives inside mypy's types.

``torch.Tensor`` gets one extra, hidden type parameter (added by a class hook
while mypy analyses ``torch._tensor.Tensor``) whose default is ``Any``.  So
every bare ``torch.Tensor`` in torch's stubs, ``nn.Parameter``,
``DTensor.to_local()`` is ``Tensor[Any]``: unknown, compatible both ways.

A known SPMD type is a type variable *value* that no scope binds: a
``TypeVarType`` in the namespace :data:`NAMESPACE` whose name is the type as
the user reads it (``V@dp, S(0)@tp``).  All of them share one id, so where the
invariant parameter asks whether two are equivalent, mypy compares their
upper bounds both ways.  The bound spells the type's local form (``S(i)``
counted as ``V``) as a signature with one keyword per mentioned axis and
``**axes: Any`` for every other axis::

    Tensor[V@dp, S(0)@tp]  ->  def (*, dp: V = ..., tp: V = ..., **axes: Any) -> object

Two such signatures are compatible both ways exactly when they agree on every
axis both mention (an axis only one mentions meets the other's ``**axes:
Any``), so mypy itself

* prints it as ``Tensor[V@dp, S(0)@tp]`` (reveal_type, arg-type, ...);
* treats an axis a type does not mention as unconstrained at every boundary
  (arguments, returns, assignments, container items, attributes): a
  ``Tensor[V@dp, I@tp]`` is accepted where ``Tensor[I@tp]`` is declared and
  the other way round, a ``Tensor[P@tp]`` is not;
* treats ``S(i)`` and ``V`` as the same type (in local SPMD ``S(i)`` *is* V:
  docs/spec.md#types), ``Tensor[Any]`` as compatible with all;
* stores it in the incremental cache and the daemon like any type.

The plugin reads a type back from the name (:func:`spmd_of`), never from the
bound: where mypy joins two compatible values (a list of both) it keeps one
side's name and joins only the bounds.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Callable, Iterable

from mypy.nodes import ARG_NAMED_OPT, ARG_STAR2, MypyFile, TypeInfo
from mypy.plugin import CheckerPluginInterface, ClassDefContext
from mypy.typeops import make_simplified_union
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    ProperType,
    Type,
    TypeAliasType,
    TypeOfAny,
    TypeTranslator,
    TypeVarId,
    TypeVarType,
    UnionType,
    get_proper_type,
)

from spmd_mypy.build_state import state_of
from spmd_mypy.fullnames import TENSOR
from spmd_stubs.core import AxisType, TensorType

NAMESPACE = "spmd_mypy"
_OTHER_AXES = "axes"
_VALUE_ID = TypeVarId(1, namespace=NAMESPACE)
"""The id every known SPMD type shares, so that mypy compares their bounds."""
_AXIS_NAMESPACE = f"{NAMESPACE}.axis"
_UNKNOWN = AnyType(TypeOfAny.special_form)
_NO_DEFAULT = AnyType(TypeOfAny.from_omitted_generics)
"""A value's default as mypy writes "none": every value shares one id, and mypy 2.0 and 2.1 expand a type
through a guard keyed by the id of a type variable with a default (every value would become the first one)."""


def add_hidden_parameter(name: str) -> Callable[[ClassDefContext], None]:
    """Class hook for ``torch._tensor.Tensor`` (and ``ProcessGroup``, :mod:`spmd_mypy.group_types`): one type
    parameter ``name``, default Any, bound ``object``.

    The default is a real one (not an omitted generic), so a bare ``Tensor``
    annotation is complete: ``--strict`` (``disallow_any_generics``) accepts
    it as it does without the plugin.  The bound is ``object`` because mypy
    checks every written ``Tensor[...]``'s argument against the bound, and
    skips that subtype check for ``object`` (``semanal_typeargs.validate_args``);
    the values' own bounds (:func:`with_spmd`) are what compatibility compares.
    """

    def add(ctx: ClassDefContext) -> None:
        info = ctx.cls.info
        if info.type_vars:
            return
        top = ctx.api.named_type("builtins.object")
        owner = info.fullname
        ctx.cls.type_vars = [TypeVarType(name, f"{owner}.{name}", TypeVarId(1, namespace=owner), [], top, _UNKNOWN)]
        info.add_type_vars()

    return add


class InternedValues:
    """The hidden argument of each known SPMD type, built once and shared by every type that carries it.

    Sharing one object per SPMD type (interning) saves building a value and
    its bound for every annotation and op result, and lets mypy compare two
    equal tensor types by identity (a tuple of arguments compares its items
    with ``is`` first) instead of comparing the bounds.  The values belong to
    one build (:class:`spmd_mypy.build_state.BuildState`); within it they are
    built again when ``builtins`` is analysed afresh.
    """

    def __init__(self) -> None:
        self.modules: dict[str, MypyFile] = {}
        """Where the values' bounds find ``builtins.function`` (the plugin passes mypy's modules)."""
        self.top: TypeInfo | None = None
        self.no_axis: CallableType | None = None
        self.by_type: dict[TensorType, TypeVarType] = {}

    def value(self, tensor: Instance, tensor_type: TensorType) -> TypeVarType:
        top = tensor.type.mro[-1]
        if top is not self.top:
            self._start(top)
        value = self.by_type.get(tensor_type)
        if value is None:
            value = self.by_type[tensor_type] = self._build(tensor_type)
        return value

    def _start(self, top: TypeInfo) -> None:
        self.top, self.by_type = top, {}
        symbol = self.modules["builtins"].names["function"]
        assert isinstance(symbol.node, TypeInfo)
        self.no_axis = CallableType([_UNKNOWN], [ARG_STAR2], [_OTHER_AXES], Instance(top, []), Instance(symbol.node, []))

    def _build(self, tensor_type: TensorType) -> TypeVarType:
        assert self.no_axis is not None
        name = str(tensor_type)
        bound = _bound(self.no_axis, local_form(tensor_type))
        return TypeVarType(name, f"{NAMESPACE}.{name}", _VALUE_ID, [], bound, _NO_DEFAULT)


def unknown_tensor(api: CheckerPluginInterface) -> Instance | None:
    """A plain ``torch.Tensor`` (unknown SPMD type); None where the program never imports torch."""
    module, _, name = TENSOR.rpartition(".")
    tree = getattr(api, "modules", {}).get(module)
    symbol = tree.names.get(name) if tree is not None else None
    if symbol is None or not isinstance(symbol.node, TypeInfo) or not is_tensor(symbol.node):
        return None
    return Instance(symbol.node, [AnyType(TypeOfAny.special_form)])


def local_form(tensor_type: TensorType) -> TensorType:
    """The type with shard dims forgotten: what decides compatibility."""
    return TensorType(tuple((axis, t.local) for axis, t in tensor_type.axes))


def with_spmd(api: object, tensor: Instance, tensor_type: TensorType | None) -> Instance:
    """``tensor`` (a ``torch.Tensor`` instance) carrying ``tensor_type`` (None: unknown).

    The argument is the SPMD type's shared value (:class:`InternedValues`), whose
    bound is that of a type that mentions no axis, ``def (**axes: Any) ->
    object``, extended by one keyword per axis.
    """
    if tensor_type is None or not tensor_type.axes:
        return tensor.copy_modified(args=[_UNKNOWN])
    return tensor.copy_modified(args=[state_of(api).values.value(tensor, tensor_type)])


def _bound(no_axis: CallableType, local: TensorType) -> CallableType:
    """``def (*, dp: V = ..., tp: I = ..., **axes: Any) -> object``: what compatibility compares."""
    axis_values = [unbound_value(str(axis_type), _AXIS_NAMESPACE, no_axis.ret_type) for _, axis_type in local.axes]
    return no_axis.copy_modified(
        arg_types=[*axis_values, *no_axis.arg_types],
        arg_kinds=[*(ARG_NAMED_OPT for _ in axis_values), *no_axis.arg_kinds],
        arg_names=[*(axis for axis, _ in local.axes), *no_axis.arg_names],
    )


def unbound_value(name: str, namespace: str, top: Type) -> TypeVarType:
    """A type variable value named ``name`` that no scope binds: compatible only with itself and Any (its id
    is its name's, in ``namespace``).  Used for one axis's local type (``V``, ``P``, ``Pmax``...) in a tensor
    type's bound, and for a process group's axis (:mod:`spmd_mypy.group_types`)."""
    return TypeVarType(name, f"{namespace}.{name}", _value_id(name, namespace), [], top, _UNKNOWN)


@functools.lru_cache(maxsize=128)
def _value_id(name: str, namespace: str) -> TypeVarId:
    digest = hashlib.blake2b(name.encode(), digest_size=7).digest()
    return TypeVarId(int.from_bytes(digest, "big") + 1, namespace=namespace)


@functools.lru_cache(maxsize=4096)
def _parse(name: str) -> TensorType:
    return TensorType.parse(name)


def is_tensor(info: TypeInfo) -> bool:
    return info.fullname == TENSOR and len(info.type_vars) == 1


def tensor_instance(typ: Type) -> Instance | None:
    """``typ`` as a ``torch.Tensor`` instance (subclasses: the Tensor base), else None."""
    proper = get_proper_type(typ)
    if not isinstance(proper, Instance):
        return None
    if is_tensor(proper.type):
        return proper
    for base in proper.type.mro:
        if is_tensor(base):
            # nn.Parameter and other subclasses inherit Tensor[Any]: unknown.
            return Instance(base, [AnyType(TypeOfAny.special_form)])
    return None


def spmd_of(typ: Type) -> TensorType | None:
    """The known SPMD type of one tensor type, None when unknown or not a tensor."""
    tensor = tensor_instance(typ)
    return None if tensor is None else _carried(tensor)


def _carried(tensor: Instance) -> TensorType | None:
    """The known SPMD type a ``torch.Tensor`` instance carries, None when unknown."""
    if len(tensor.args) != 1:
        return None
    value = get_proper_type(tensor.args[0])
    if isinstance(value, TypeVarType) and value.id.namespace == NAMESPACE:
        return _parse(value.name)
    return None


def members(typ: Type) -> list[ProperType]:
    """The items of a union (flattened), or the type itself."""
    proper = get_proper_type(typ)
    if isinstance(proper, UnionType):
        return [m for item in proper.items for m in members(item)]
    return [proper]


def spmd_members(typ: Type) -> list[TensorType | None]:
    """One entry per tensor member of ``typ`` (a union after a branch join)."""
    tensors = (tensor_instance(member) for member in members(typ))
    return [_carried(tensor) for tensor in tensors if tensor is not None]


def has_spmd(typ: Type) -> bool:
    return any(t is not None for t in spmd_members(typ))


class TensorTranslator(TypeTranslator):
    """Rewrites every ``torch.Tensor`` inside a type (through aliases, tuples, unions)."""

    def tensor(self, t: Instance) -> Type:
        raise NotImplementedError

    def visit_instance(self, t: Instance) -> Type:
        if is_tensor(t.type):
            return self.tensor(t)
        return super().visit_instance(t)

    def visit_type_alias_type(self, t: TypeAliasType) -> Type:
        return get_proper_type(t).accept(self)


class _Retype(TensorTranslator):
    def __init__(self, api: object, tensor_type: TensorType | None) -> None:
        super().__init__()
        self.api, self.tensor_type = api, tensor_type

    def tensor(self, t: Instance) -> Type:
        return with_spmd(self.api, t, self.tensor_type)


def retype(api: object, typ: Type, tensor_type: TensorType | None) -> Type:
    """``typ`` with every ``torch.Tensor`` in it (tuples, lists, Optional) given ``tensor_type``."""
    if isinstance(typ, Instance) and is_tensor(typ.type):
        return with_spmd(api, typ, tensor_type)  # most op results: no translator to build
    return typ.accept(_Retype(api, tensor_type))


def union_of(types: Iterable[Type]) -> Type:
    items = list(types)
    if len(items) == 1 and isinstance(items[0], Instance):
        return items[0]  # what mypy's union of one instance is, without flattening it first (most op results)
    return make_simplified_union(items)


def result_type(api: object, default: Type, results: Iterable[TensorType | None]) -> Type:
    """The declared result type with the inferred SPMD types put into its tensors (a union for several)."""
    return union_of(retype(api, default, tensor_type) for tensor_type in dict.fromkeys(results))


def updated_members(typ: Type, update: Callable[[dict[str, AxisType]], None]) -> list[TensorType | None]:
    """Each tensor member's axes (none for an unknown one) after ``update`` changed them in place."""
    results: list[TensorType | None] = []
    for member in spmd_members(typ) or [None]:
        mapping = member.as_dict() if member is not None else {}
        update(mapping)
        results.append(TensorType.of(mapping))
    return results


class _FindsTensor(TensorTranslator):
    # mypy's compiled query visitors cannot be subclassed; a translator can.
    def __init__(self) -> None:
        super().__init__()
        self.found = False

    def tensor(self, t: Instance) -> Type:
        self.found = True
        return t


def contains_tensor(typ: Type) -> bool:
    """Whether a ``torch.Tensor`` occurs in ``typ`` (a result worth typing)."""
    finder = _FindsTensor()
    typ.accept(finder)
    return finder.found


def typed_tensors_in(typ: Type) -> list[TensorType]:
    """The known SPMD types of every tensor in ``typ`` (through tuples, unions, callables)."""
    found: list[TensorType] = []

    class _Collect(TensorTranslator):
        def tensor(self, t: Instance) -> Type:
            tensor_type = spmd_of(t)
            if tensor_type is not None:
                found.append(tensor_type)
            return t

    typ.accept(_Collect())
    return found
