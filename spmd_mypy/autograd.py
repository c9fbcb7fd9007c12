"""Hand-written autograd: a ``torch.autograd.Function`` subclass whose ``forward`` has SPMD types.

``Fn.apply(...)`` is typed from ``Fn.forward`` without its ``ctx``: the call
is then checked, and its axes passed through, exactly as a call of a plain
function with that signature (:mod:`.signatures`).  torch declares
``apply(cls, *args, **kwargs)`` untyped, so a Function whose ``forward``
mentions no SPMD type keeps that signature: the plugin changes nothing there.
"""

from __future__ import annotations

from mypy.nodes import TypeInfo
from mypy.plugin import AttributeContext
from mypy.types import CallableType, Instance, Type, TypeType, get_proper_type

from spmd_mypy.polymorphism import own_method
from spmd_mypy.representation import typed_tensors_in

FUNCTION = "torch.autograd.function.Function"


def apply_attribute(ctx: AttributeContext) -> Type:
    """Class attribute hook for ``Fn.apply``: ``Fn.forward``'s signature without ``ctx``, where it has SPMD types."""
    function = _function_class(ctx.type)
    forward = spmd_signature(function, "forward") if function is not None else None
    if function is None or forward is None:
        return ctx.default_attr_type
    return forward.copy_modified(name=f"apply of {function.name}")


def spmd_signature(function: TypeInfo, name: str) -> CallableType | None:
    """The Function's own ``forward`` or ``backward`` without ``ctx``, where it mentions an SPMD type."""
    method = own_method(function, name, FUNCTION)
    if not isinstance(method, CallableType) or not method.arg_types or not typed_tensors_in(method):
        return None
    return method.copy_modified(
        arg_types=method.arg_types[1:], arg_kinds=method.arg_kinds[1:], arg_names=method.arg_names[1:]
    )


def _function_class(receiver: Type) -> TypeInfo | None:
    """The ``Function`` subclass a class attribute is read from (``Fn.apply``, ``type[Fn]``'s ``apply``)."""
    proper = get_proper_type(receiver)
    if isinstance(proper, CallableType) and proper.is_type_obj():
        info = proper.type_object()
    elif isinstance(proper, TypeType) and isinstance(proper.item, Instance):
        info = proper.item.type
    else:
        return None
    return info if info.has_base(FUNCTION) else None
