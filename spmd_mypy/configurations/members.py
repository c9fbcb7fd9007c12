"""``spmd-configuration``: a flag declared by its enum type, set to a member its class does not have.

``tp_mode = TensorParallelLinearMode.REDUCE_SCATER`` would otherwise
decide every comparison with a member of ``TensorParallelLinearMode``
false, silently: no branch that tests the mode would be checked.  The
class is known only once mypy has analysed it, so the member is checked
where code names one of the class's members (``TensorParallelLinearMode.ALL_REDUCE``),
in every configuration declared: a plain run reports another
configuration's misspelling too.
"""

from __future__ import annotations

from typing import Callable

from mypy.nodes import TypeInfo
from mypy.plugin import AttributeContext
from mypy.types import CallableType, Instance, ProperType, Type, TypeType, get_proper_type

from spmd_mypy import errorcodes, report
from spmd_mypy.configurations.declared import Configuration, Member, enum_member


def member_hook(fullname: str, configurations: tuple[Configuration, ...]) -> Callable[[AttributeContext], Type] | None:
    """The check of ``<class>.<member>`` for a class some configuration's flag is declared by; None for
    any other class attribute."""
    enum, _, _name = fullname.rpartition(".")
    declared = [(configuration.name, flag, member) for configuration in configurations
                for flag, value in configuration.flags
                if (member := enum_member(value)) is not None and _names(member, enum)]
    if not declared:
        return None

    def check(ctx: AttributeContext) -> Type:
        info = _class_of(get_proper_type(ctx.type))
        if info is None or not info.is_enum or _name not in info.enum_members:
            return ctx.default_attr_type
        members = info.enum_members
        for configuration, flag, member in declared:
            if member.name not in members:
                report.fail(
                    ctx.api, ctx.context,
                    f"configuration {configuration} sets {flag} = {member}, which is no member of {info.fullname}: "
                    f"every comparison with its members is decided false. Fix: set {flag} to one of "
                    f"{', '.join(f'{member.enum}.{name}' for name in members)} in the configurations of "
                    f"[spmd_mypy] (docs/checker.md#configurations).",
                    errorcodes.CONFIGURATION,
                )
        return ctx.default_attr_type

    return check


def _names(member: Member, enum: str) -> bool:
    """Whether ``member``'s class as written is the class ``enum`` (a full name): by its full name where
    a module path is written, by its own name where it is not."""
    return enum == member.enum if "." in member.enum else enum.rpartition(".")[2] == member.enum


def _class_of(accessed: ProperType) -> TypeInfo | None:
    """The class whose attribute is read: ``Mode.X``'s ``Mode`` (a class object, or ``type[Mode]``)."""
    if isinstance(accessed, CallableType) and accessed.is_type_obj():
        return accessed.type_object()
    if isinstance(accessed, TypeType) and isinstance(item := get_proper_type(accessed.item), Instance):
        return item.type
    return None
