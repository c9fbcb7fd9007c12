"""Hand-written autograd: a ``torch.autograd.Function`` subclass whose ``forward`` has SPMD types.

``Fn.apply(...)`` is typed from ``Fn.forward`` without its ``ctx``: the call
is then checked, and its axes passed through, exactly as a call of a plain
function with that signature (:mod:`.signatures`).  torch declares
``apply(cls, *args, **kwargs)`` untyped, so a Function whose ``forward``
mentions no SPMD type keeps that signature: the plugin changes nothing there.

Where ``backward`` has SPMD types too, it must be ``forward``'s per-axis dual
(:func:`spmd_stubs.core.dual`: R<->P, I<->I, V<->V, S(i)<->S(i)): autograd
calls it with one gradient per output of ``forward``, each of the output's
dual type, and takes back one gradient per input of ``forward``, each of the
input's dual type or None (an input that is not a tensor takes None; an
unannotated one may be a tensor).  A
mismatch is an ``spmd-autograd`` error at the ``backward``.  An axis only one
side mentions is unconstrained, as at every boundary.
"""

from __future__ import annotations

from typing import Callable, Iterator, cast

from mypy.nodes import ARG_POS, TypeInfo
from mypy.plugin import AttributeContext, CheckerPluginInterface, ClassDefContext
from mypy.semanal import SemanticAnalyzer
from mypy.semanal_shared import PRIORITY_FALLBACKS
from mypy.types import AnyType, CallableType, Instance, TupleType, Type, TypeType, get_proper_type

from spmd_mypy import errorcodes, report
from spmd_mypy.fullnames import AUTOGRAD_FUNCTION
from spmd_mypy.polymorphism import own_method
from spmd_mypy.representation import members, spmd_members, spmd_of, tensor_instance, typed_tensors_in
from spmd_stubs.core import TensorType, dual


def apply_attribute(ctx: AttributeContext) -> Type:
    """Class attribute hook for ``Fn.apply``: ``Fn.forward``'s signature without ``ctx``, where it has SPMD types."""
    function = _function_class(ctx.type)
    forward = spmd_signature(function, "forward") if function is not None else None
    if function is None or forward is None:
        return ctx.default_attr_type
    return forward.copy_modified(name=f"apply of {function.name}")


def spmd_signature(function: TypeInfo, name: str) -> CallableType | None:
    """The Function's own ``forward`` or ``backward`` without ``ctx``, where it mentions an SPMD type."""
    method = own_method(function, name, AUTOGRAD_FUNCTION)
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
    return info if info.has_base(AUTOGRAD_FUNCTION) else None


_METADATA, _SCHEDULED = "spmd_mypy", "backward_check"
"""Where a Function's pending check is marked (mypy's per-class plugin state), so it is scheduled once."""


def after_signatures(check: Callable[[ClassDefContext], None]) -> Callable[[ClassDefContext], None]:
    """A base class hook that runs ``check`` once the module's function signatures are analysed.

    mypy runs a base class hook when it has analysed the class body, before
    the methods' signatures (their annotations are still unanalysed then),
    and again after each deferral; a semantic analyser patch runs once, after
    every function of the module has been analysed.  What ``check`` reports
    then belongs to the module like any semantic analyser error: mypy caches
    it with the module, and the daemon reports it again whenever it
    re-analyses the module.
    """

    def schedule(ctx: ClassDefContext) -> None:
        analyzer = ctx.api
        assert isinstance(analyzer, SemanticAnalyzer)
        info = ctx.cls.info
        if info.metadata.setdefault(_METADATA, {}).get(_SCHEDULED):
            return
        info.metadata[_METADATA][_SCHEDULED] = True
        module, options = analyzer.cur_mod_node, analyzer.options

        def patch() -> None:
            del info.metadata[_METADATA]
            with analyzer.file_context(module, options):
                check(ctx)

        analyzer.schedule_patch(PRIORITY_FALLBACKS, patch)

    return schedule


def check_backward(ctx: ClassDefContext) -> None:
    """Report every place where the Function's ``backward`` is not the dual of its ``forward``."""
    function = ctx.cls.info
    forward, backward = spmd_signature(function, "forward"), spmd_signature(function, "backward")
    if forward is None or backward is None:
        return
    where = backward.definition or ctx.cls
    for message in (*_gradient_parameters(function.name, forward, backward),
                    *_gradient_returns(function.name, forward, backward)):
        # report.fail needs fail() and msg, which the semantic analyser has; it has
        # no module tree, so the message goes without a source snippet.
        report.fail(cast(CheckerPluginInterface, ctx.api), where, message, errorcodes.AUTOGRAD)


def _gradient_parameters(name: str, forward: CallableType, backward: CallableType) -> Iterator[str]:
    """backward's parameters against forward's outputs: one each, of the dual type."""
    outputs = _items(forward.ret_type)
    if outputs is None or any(kind != ARG_POS for kind in backward.arg_kinds):
        return
    if len(backward.arg_types) != len(outputs):
        yield (f"`{name}.backward` takes {len(backward.arg_types)} gradient(s) but forward returns "
               f"{len(outputs)} output(s); autograd passes one gradient per output. "
               "Fix: give backward one parameter per output of forward.")
        return
    for position, (output, gradient) in enumerate(zip(outputs, backward.arg_types), start=1):
        what = _position("parameter", position, backward.arg_names[position - 1])
        yield from _non_duals(name, what, f"output {position}", output, gradient)


def _gradient_returns(name: str, forward: CallableType, backward: CallableType) -> Iterator[str]:
    """backward's returns against forward's inputs: one each, of the dual type or None."""
    returned = _items(backward.ret_type)
    if returned is None:
        return
    if len(returned) != len(forward.arg_types):
        yield (f"`{name}.backward` returns {len(returned)} gradient(s) but forward takes "
               f"{len(forward.arg_types)} input(s); autograd wants one gradient per input. "
               "Fix: return one gradient per input of forward (None for an input that takes none).")
        return
    for position, (argument, gradient) in enumerate(zip(forward.arg_types, returned), start=1):
        what, of = f"return {position}", _position("argument", position, forward.arg_names[position - 1])
        if _is_tensor(gradient) and not _may_be_tensor(argument):
            yield (f"`{name}.backward` {what} is a tensor, but forward's {of} is not a tensor and takes no "
                   "gradient. Fix: return None there.")
        yield from _non_duals(name, what, of, argument, gradient)


def _non_duals(name: str, what: str, of: str, primal: Type, gradient: Type) -> Iterator[str]:
    """One message per axis where ``gradient`` is not the dual of the (typed) tensor ``primal``."""
    declared = spmd_of(primal)
    if declared is None:
        return
    required = TensorType.of({axis: dual(axis_type) for axis, axis_type in declared.axes})
    for found in filter(None, spmd_members(gradient)):
        for axis, axis_type in declared.axes:
            got, wanted = found.get(axis), required.get(axis)
            if got is not None and wanted is not None and got.local != wanted.local:
                yield (f"`{name}.backward` {what} is {got.on(axis)} on axis {axis}, but it is the gradient of "
                       f"forward's {of}, {axis_type.on(axis)}, whose dual is {wanted.on(axis)}. "
                       f"Fix: annotate it Tensor[{required}] (or change forward's type).")


def _position(kind: str, position: int, name: str | None) -> str:
    """``parameter 1 (`g`)``: a place in a signature, as the message names it."""
    return f"{kind} {position} (`{name}`)" if name else f"{kind} {position}"


def _items(typ: Type) -> list[Type] | None:
    """The outputs a return type stands for (a fixed tuple's items); None where their number is unknown."""
    proper = get_proper_type(typ)
    if isinstance(proper, TupleType):
        return proper.items
    if isinstance(proper, AnyType) or (isinstance(proper, Instance) and proper.type.fullname == "builtins.tuple"):
        return None
    return [typ]


def _is_tensor(typ: Type) -> bool:
    return any(tensor_instance(member) is not None for member in members(typ))


def _may_be_tensor(typ: Type) -> bool:
    """Whether a value of ``typ`` may be a tensor: a tensor type, or ``Any`` (an unannotated parameter)."""
    return _is_tensor(typ) or any(isinstance(member, AnyType) for member in members(typ))
