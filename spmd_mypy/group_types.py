"""Process groups that carry their mesh axis in their type: ``Group[tp]``.

``torch.distributed.ProcessGroup`` gets one hidden type parameter (a class
hook while mypy analyses torch's stub), default ``Any``, as ``torch.Tensor``
does (:mod:`spmd_mypy.representation`): every bare ``ProcessGroup`` is a
group over an unknown axis, compatible both ways.  A known axis is a type
variable value that no scope binds, one id per axis name, so ``Group[tp]``
is compatible with itself and ``Any`` only: passing a ``Group[dp]`` where a
``Group[tp]`` is declared is mypy's ``arg-type``.  mypy prints it
``ProcessGroup[tp]``.

A group gets its axis from

* an annotation ``Group[tp]`` (``spmd_stubs.Group``, erased to
  ``ProcessGroup`` at run time), on a parameter, an attribute, a return;
* the calls that name an axis for certain (:mod:`spmd_mypy.groups`):
  ``spmd.group_of(tp)``, ``mesh.get_group("tp")``, a function declared in
  ``[spmd_mypy] groups``;

and mypy carries it from there through assignments, attributes and calls.
"""

from __future__ import annotations

from mypy.nodes import PlaceholderNode, TypeInfo
from mypy.plugin import AnalyzeTypeContext
from mypy.types import Instance, ProperType, Type, TypeVarType, get_proper_type

from spmd_mypy import report
from spmd_mypy.annotations import AnnotationError, axis_name_of
from spmd_mypy.fullnames import PROCESS_GROUP
from spmd_mypy.representation import add_hidden_parameter, members, unbound_value

_NAMESPACE = "spmd_mypy.group"


add_axis_parameter = add_hidden_parameter("_MeshAxis")
"""Class hook for ``ProcessGroup``: its hidden parameter, as ``torch.Tensor``'s and for the same reasons."""


def analyze_group(ctx: AnalyzeTypeContext) -> Type:
    """Type-analyze hook for ``spmd_stubs.Group[axis]``: a ``ProcessGroup`` over ``axis``."""
    group = ctx.api.named_type(PROCESS_GROUP, [])
    if len(ctx.type.args) != 1:
        report.fail_in_annotation(ctx.api, ctx.context, "Bad SPMD annotation: Group takes one mesh axis: Group[tp]")
        return group
    arg = ctx.type.args[0]
    written = getattr(arg, "name", str(arg))
    symbol = ctx.api.lookup_qualified(written, ctx.context, suppress_errors=True)  # type: ignore[attr-defined]
    node = symbol.node if symbol is not None else None
    if isinstance(node, PlaceholderNode):
        ctx.api.api.defer()  # type: ignore[attr-defined]
        return group
    try:
        axis = axis_name_of(node, written)
    except AnnotationError as error:
        report.fail_in_annotation(ctx.api, ctx.context, f"Bad SPMD annotation: {error}")
        return group
    return with_axis(group, axis)


def typed_group(default: Type, axis: str) -> Type:
    """``default`` (a call's inferred ``ProcessGroup``) as a group over ``axis``; anything else unchanged."""
    proper = get_proper_type(default)
    return with_axis(proper, axis) if isinstance(proper, Instance) and is_group(proper.type) else default


def with_axis(group: Instance, axis: str) -> Instance:
    return group.copy_modified(args=[unbound_value(axis, _NAMESPACE, Instance(group.type.mro[-1], []))])


def axis_of_type(typ: Type | None) -> str | None:
    """The axis a group's type carries (a union's, ``Optional`` included, where its groups name one); None
    where unknown."""
    found = {_carried(member) for member in members(typ)} - {None} if typ is not None else set()
    return found.pop() if len(found) == 1 else None


def _carried(proper: ProperType) -> str | None:
    if not (isinstance(proper, Instance) and is_group(proper.type) and len(proper.args) == 1):
        return None
    value = get_proper_type(proper.args[0])
    return value.name if isinstance(value, TypeVarType) and value.id.namespace == _NAMESPACE else None


def is_group(info: TypeInfo) -> bool:
    return info.fullname == PROCESS_GROUP and len(info.type_vars) == 1
