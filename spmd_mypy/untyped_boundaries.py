"""Where a typed value flows into a place that forgets its SPMD type: ``spmd-untyped-boundary`` (strict).

A typed tensor's SPMD type is lost, silently without strict mode, where it

* is passed to a parameter that is unannotated, or typed plain
  ``torch.Tensor`` (a helper, a method, a typed library's function);
* is passed to a module whose ``forward`` is unannotated (``self.mlp(x)``);
* is passed to a torch module (``nn.Linear``) whose parameter has no SPMD type
  (:mod:`spmd_mypy.torch_modules`): the result is judged without it;
* is passed to a module whose items the checker does not know: an
  ``nn.Sequential``, or a value typed plain ``nn.Module`` (an item of an
  ``nn.ModuleList``);
* is passed to untyped third-party code, a name from an import mypy could
  not resolve (a kernel such as ``flash_attn_func``), or to another value
  mypy infers ``Any`` (an attribute holding such a kernel): its result is ``Any``;
* is returned where the declared return is plain ``torch.Tensor``, or is
  missing in a function that annotates its parameters (callers get ``Any``);
* is assigned to a variable or attribute declared plain ``torch.Tensor``
  (``out: torch.Tensor = ...``, ``self.h = ...`` with ``h: torch.Tensor``);
* is declared by a layout held as data that the checker cannot evaluate or
  follow through its module (:mod:`spmd_mypy.layouts`).

A fully unannotated function's body is not checked: what it loses is
reported where typed values go in, at its calls.  Every message names its
kind of place in the same words (:attr:`Boundary.phrase`), so a tool reading
mypy's report (the coverage report) tells the kinds apart by :func:`kind_of`.
An explicit ``Any`` is the user's choice and is not reported.
"""

from __future__ import annotations

from enum import Enum
from typing import Callable, Union

from mypy.messages import format_type_bare
from mypy.nodes import CallExpr, Context, Expression, FuncDef, MemberExpr, NameExpr
from mypy.plugin import CheckerPluginInterface, FunctionContext, MethodContext
from mypy.types import AnyType, CallableType, Instance, TupleType, Type, TypeOfAny, get_proper_type

from spmd_mypy import errorcodes, report
from spmd_mypy.fullnames import MODULE
from spmd_mypy.representation import members, spmd_of, tensor_instance, typed_tensors_in
from spmd_mypy.wrappers import wrapped_value

CallContext = Union[FunctionContext, MethodContext]


class Boundary(Enum):
    """A kind of place where a typed value's SPMD type is lost, and the words a message names it with."""

    UNANNOTATED_PARAMETER = "unannotated parameter"
    PLAIN_PARAMETER = "parameter typed plain torch.Tensor"
    UNANNOTATED_MODULE = "module with an unannotated forward"
    UNTYPED_MODULE_PARAMETER = "torch module's untyped parameter"
    MODULE_CONTAINER = "module container"
    PLAIN_MODULE = "module typed plain nn.Module"
    THIRD_PARTY = "untyped third-party call"
    UNTYPED_VALUE = "call of an untyped value"
    UNANNOTATED_RETURN = "unannotated return"
    PLAIN_RETURN = "return typed plain torch.Tensor"
    PLAIN_VARIABLE = "variable typed plain torch.Tensor"
    UNCHECKED_LAYOUT = "layout the checker cannot follow"

    @property
    def phrase(self) -> str:
        return f"lost at an {self.value}" if self.value[0] in "aeiou" else f"lost at a {self.value}"


def kind_of(message: str) -> Boundary | None:
    """The kind of boundary an ``spmd-untyped-boundary`` message reports."""
    return next((kind for kind in Boundary if kind.phrase in message), None)


def _fail(api: CheckerPluginInterface, context: Context, message: str) -> None:
    report.fail(api, context, message, errorcodes.UNTYPED_BOUNDARY)


def _shown(typ: Type, api: CheckerPluginInterface) -> str:
    return format_type_bare(typ, api.options)


# --------------------------------------------------------------------------
# Calls: arguments bound to parameters that forget their types
# --------------------------------------------------------------------------


def call_hook(fullname: str) -> Callable[[CallContext], Type]:
    """A call of a function or method outside torch (strict): typed arguments its parameters forget."""
    name = fullname.rpartition(".")[2]

    def hook(ctx: CallContext) -> Type:
        signature = _callee_signature(ctx)
        if signature is not None and isinstance(ctx.context, CallExpr):
            _check_arguments(ctx, name, signature)
        return ctx.default_return_type

    return hook


def _callee_signature(ctx: CallContext) -> CallableType | None:
    """The callee's signature as mypy bound it (``self`` dropped for a method), where it is one."""
    callee = ctx.context.callee if isinstance(ctx.context, CallExpr) else None
    found = ctx.api.lookup_type_or_none(callee) if callee is not None else None  # type: ignore[attr-defined]
    proper = get_proper_type(found) if found is not None else None
    return proper if isinstance(proper, CallableType) else None


def _check_arguments(ctx: CallContext, name: str, signature: CallableType) -> None:
    lost = [(given or formal_name, typ, kind)
            for formal, formal_name, types, names in zip(signature.arg_types, ctx.callee_arg_names, ctx.arg_types,
                                                         ctx.arg_names)
            if (kind := _forgets(formal)) is not None
            for typ, given in zip(types, names) if typed_tensors_in(typ)]
    if not lost:
        return
    kind = lost[0][2]
    taken = ", ".join(f"{_shown(typ, ctx.api)} as `{formal}`" for formal, typ, _ in lost)
    untyped = signature.implicit
    consequence = f"; `{name}` has no annotations, so its result is unknown as well" if untyped else ""
    annotate = ", ".join(f"`{formal}: {_shown(typ, ctx.api)}`" for formal, typ, _ in lost)
    fix = f"annotate {annotate}" + (f" and `{name}`'s return" if untyped else "")
    _fail(ctx.api, ctx.context,
          f"`{name}` takes {taken}, {kind.phrase}{consequence}. Fix: {fix} (`spmd-migrate --infer` "
          "writes such annotations; for code you do not own, an overlay: docs/third_party.md).")


def _forgets(formal: Type) -> Boundary | None:
    """The kind of parameter that forgets a typed argument's SPMD type; None where it keeps it."""
    proper = get_proper_type(formal)
    if isinstance(proper, AnyType):
        return Boundary.UNANNOTATED_PARAMETER if proper.type_of_any == TypeOfAny.unannotated else None
    return Boundary.PLAIN_PARAMETER if _plain_member(formal) else None


def unannotated_module(ctx: MethodContext, receiver: Instance) -> None:
    """``module(x)`` with a typed ``x`` where the module's ``forward`` has no annotations (strict)."""
    typed = [typ for types in ctx.arg_types for typ in types if typed_tensors_in(typ)]
    if typed:
        name = receiver.type.name
        _fail(ctx.api, ctx.context,
              f"`{name}` takes {', '.join(_shown(t, ctx.api) for t in typed)}, {Boundary.UNANNOTATED_MODULE.phrase}: "
              f"`{name}.forward` has no annotations, so the result is unknown. Fix: annotate `{name}.forward`'s "
              "parameters and return with SPMD types (`spmd-migrate --infer` writes them).")


def untyped_module_parameters(ctx: MethodContext, module: str, op: str, parameters: list[str], taken: Type) -> None:
    """``module(x)`` with a typed ``x`` where the torch module's ``parameters`` have no SPMD type (strict).

    ``module`` is ``nn.Linear`` for torch's own class (declared on a subclass), else the user's subclass
    (declared on it)."""
    axes = sorted({axis for tensor in typed_tensors_in(taken) for axis, _ in tensor.axes})
    on_axes = ", ".join(f"axis {axis}" for axis in axes)
    named = ", ".join(f"`{p}`" for p in parameters)
    have, them = ("has", "it") if len(parameters) == 1 else ("have", "them")
    example = ", ".join(f"<type>@{axis}" for axis in axes)
    declarations = "; ".join(f"{p}: Tensor[{example}]" for p in parameters)
    without_bias = " (`bias: None` where it has none)" if "bias" in parameters else ""
    where = f"on a subclass of {module} and build the module from it" if module.startswith("nn.") else f"on {module}"
    _fail(ctx.api, ctx.context,
          f"`{module}`'s {named} {have} no SPMD type on {on_axes}, {Boundary.UNTYPED_MODULE_PARAMETER.phrase}: "
          f"the {_shown(taken, ctx.api)} it takes is judged by {op} with {them} unknown there. Fix: declare `{declarations}`{without_bias} {where} "
          "(docs/spec.md#torchnn-modules).")


def unknown_items(ctx: MethodContext, receiver: Instance) -> None:
    """``module(x)`` with a typed ``x`` where the module runs items the checker does not know (strict)."""
    typed = [typ for types in ctx.arg_types for typ in types if typed_tensors_in(typ)]
    if not typed:
        return
    axes = sorted({axis for typ in typed for tensor in typed_tensors_in(typ) for axis, _ in tensor.axes})
    state = "y = assert_type(y, " + ", ".join(f"<type>@{axis}" for axis in axes) + ")"
    taken = ", ".join(_shown(t, ctx.api) for t in typed)
    callee = ctx.context.callee if isinstance(ctx.context, CallExpr) else None
    name = _dotted(callee) if callee is not None else receiver.type.name
    if receiver.type.fullname == MODULE:
        _fail(ctx.api, ctx.context,
              f"`{name}` takes {taken}, {Boundary.PLAIN_MODULE.phrase}: its class, and so its forward, is not known "
              "statically (an item of an nn.ModuleList or nn.ModuleDict is typed so), so the result is unknown. "
              f"Fix: narrow it to its class (`assert isinstance({name}, Block)`, Block's forward annotated with SPMD "
              f"types), or state the result's type: {state}.")
        return
    _fail(ctx.api, ctx.context,
          f"`{name}` takes {taken}, {Boundary.MODULE_CONTAINER.phrase}: it runs its items in turn, which the "
          "checker does not know statically, so the result is unknown. Fix: call the layers one by one "
          f"(`x = self.up(x)`) in a forward annotated with SPMD types, or state the result's type: {state}.")


# --------------------------------------------------------------------------
# Calls of values that may be Any (wrapped: spmd_mypy.wrappers)
# --------------------------------------------------------------------------


def called_value_hook(ctx: FunctionContext) -> Type:
    """``<called_value>(kernel(q, k))``: the typed arguments an ``Any`` callee swallows (strict).

    ``Any`` from an import mypy could not resolve is untyped third-party
    code; any other inferred ``Any`` (an attribute holding an untyped kernel)
    an untyped value; an explicit ``Any`` is the user's choice.
    """
    call, found = wrapped_value(ctx)
    if not isinstance(call, CallExpr):
        return found
    callee = ctx.api.lookup_type_or_none(call.callee)  # type: ignore[attr-defined]
    proper = get_proper_type(callee) if callee is not None else None
    if not isinstance(proper, AnyType):
        return found
    origin = proper.source_any if proper.source_any is not None else proper  # an attribute of an Any: its Any
    if origin.type_of_any == TypeOfAny.explicit:
        return found
    typed = [typ for argument in call.args
             if (typ := ctx.api.lookup_type_or_none(argument)) is not None  # type: ignore[attr-defined]
             and typed_tensors_in(typ)]
    if typed:
        name = _dotted(call.callee)
        taken = ", ".join(_shown(typ, ctx.api) for typ in typed)
        constructor = _unchecked_constructor(call.callee, ctx.api)
        if constructor is not None:
            _fail(ctx.api, call,
                  f"`{name}` takes {taken}, {Boundary.UNTYPED_VALUE.phrase}: `{constructor}.__init__`, which "
                  f"assigns it, has no annotations, so mypy does not check it and types every attribute it "
                  f"assigns Any. Fix: annotate `{constructor}.__init__` (`-> None` is enough), or set "
                  "check_untyped_defs = True in [mypy].")
            return found
        if origin.type_of_any == TypeOfAny.from_unimported_type:
            what, kind = "mypy could not resolve its import, so it is Any", Boundary.THIRD_PARTY
        else:
            what, kind = "mypy infers it Any", Boundary.UNTYPED_VALUE
        _fail(ctx.api, call,
              f"`{name}` takes {taken}, {kind.phrase}: {what} and its result is unknown. Fix: give `{name}` "
              "SPMD types (annotate it, or for code you do not own a stub, a .pyi on mypy_path whose parameters "
              "and return are spmd_stubs.Tensor[...], or an overlay: docs/third_party.md), or state the result's "
              "type with assert_type(result, <type>@<axis>).")
    return found


def _unchecked_constructor(callee: Expression, api: CheckerPluginInterface) -> str | None:
    """The class, for ``self.attr`` assigned in an unannotated ``__init__`` mypy does not check (so ``Any``)."""
    if not isinstance(callee, MemberExpr) or api.options.check_untyped_defs:
        return None
    owner = get_proper_type(api.lookup_type_or_none(callee.expr))  # type: ignore[attr-defined]
    if not isinstance(owner, Instance):
        return None
    assigned = next((cls for cls in owner.type.mro if callee.name in cls.names), None)
    constructor = assigned.get_method("__init__") if assigned is not None else None
    return assigned.name if isinstance(constructor, FuncDef) and constructor.is_dynamic() else None


def _dotted(callee: Expression) -> str:
    if isinstance(callee, MemberExpr):
        return f"{_dotted(callee.expr)}.{callee.name}"
    return callee.name if isinstance(callee, NameExpr) else "the callee"


# --------------------------------------------------------------------------
# Returns (wrapped: spmd_mypy.wrappers)
# --------------------------------------------------------------------------


def forgets_return(function: FuncDef) -> bool:
    """Whether ``function`` declares a return that forgets SPMD types: plain ``torch.Tensor`` in it,
    or none where it annotates its parameters (its body is checked, its callers get ``Any``)."""
    signature = function.type
    if not isinstance(signature, CallableType) or function.name == "__init__":
        return False
    return _return_boundary(signature.ret_type) is not None


def _return_boundary(declared: Type) -> Boundary | None:
    """The kind of return that forgets SPMD types: none written (with annotated parameters), or one with
    a plain ``torch.Tensor`` in it; None for a return that keeps them, or an explicit ``Any``."""
    proper = get_proper_type(declared)
    if isinstance(proper, AnyType):
        return Boundary.UNANNOTATED_RETURN if proper.type_of_any == TypeOfAny.unannotated else None
    return Boundary.PLAIN_RETURN if has_plain_tensor(proper) else None


def has_plain_tensor(typ: Type) -> bool:
    """Whether a plain ``torch.Tensor`` (no SPMD type) is in ``typ`` (a union, a tuple)."""
    proper = get_proper_type(typ)
    if isinstance(proper, TupleType):
        return any(has_plain_tensor(item) for item in proper.items)
    return _plain_member(proper)


def _plain_member(typ: Type) -> bool:
    """Whether ``typ`` or a member of its union is a plain ``torch.Tensor``."""
    return any(tensor_instance(member) is not None and spmd_of(member) is None for member in members(typ))


def check_return(api: CheckerPluginInterface, where: Context, function: FuncDef, value: Type) -> None:
    """``return value`` with a typed ``value`` in a function whose declared return forgets it (strict)."""
    if not typed_tensors_in(value) or not isinstance(function.type, CallableType):
        return
    kind = _return_boundary(function.type.ret_type)
    if kind is None:
        return  # a return wrapped for another reason (a size test) that keeps its SPMD types
    shown = _shown(value, api)
    _fail(api, where, f"`{function.name}` returns {shown}, {kind.phrase}, so its callers get no SPMD type. "
                      f"Fix: annotate the return `-> {shown}`.")


def assigned_hook(ctx: FunctionContext) -> Type:
    """``target = <assigned>(value)``: a typed value assigned to a target declared plain (strict)."""
    where, value = wrapped_value(ctx)
    target = ctx.callee_arg_names[0] if ctx.callee_arg_names else None
    if typed_tensors_in(value):
        shown = _shown(value, ctx.api)
        _fail(ctx.api, where,
              f"`{target}` is declared with a plain torch.Tensor type: the {shown} assigned to it is "
              f"{Boundary.PLAIN_VARIABLE.phrase}. Fix: declare `{target}` with its SPMD type ({shown}).")
    return value
