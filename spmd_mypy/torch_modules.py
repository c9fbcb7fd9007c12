"""Calls of torch's own nn modules, judged as their functional form (docs/spec.md#torchnn-modules).

``self.up(x)`` where ``self.up`` is an ``nn.Linear``, or a subclass that
does not define its own ``forward``, is ``linear(x, self.up.weight,
self.up.bias)``, judged by the op's record as the functional call is
(:data:`spmd_stubs.core.torch_ops.modules.MODULE_FORMS`).  A parameter's type
is the one the receiver's class declares (``class ColumnLinear(nn.Linear):
weight: Tensor[S(0)@tp]``); torch declares its own plain, so on
``nn.Linear`` itself the weight is an unknown operand, which the rules leave
out of the judgement, and strict mode reports the call
(:func:`spmd_mypy.untyped_boundaries.untyped_module_parameters`).

A module whose items run in turn (``nn.Sequential``), or a value typed
plain ``nn.Module`` (an item of an ``nn.ModuleList``), has a result the
checker cannot know; any other torch module is not modelled.  Strict mode
reports a typed tensor passed to either.
"""

from __future__ import annotations

from mypy.messages import format_type_bare
from mypy.nodes import ARG_NAMED, ARG_POS, TypeInfo, Var
from mypy.plugin import MethodContext
from mypy.types import AnyType, Instance, NoneType, Type, get_proper_type

from spmd_mypy import errorcodes, report, untyped_boundaries
from spmd_mypy.build_state import state_of
from spmd_mypy.calls import declared_result
from spmd_mypy.fullnames import MODULE
from spmd_mypy.global_mode.arguments import CallArgs
from spmd_mypy.global_mode.refine import refiner
from spmd_mypy.inference import Actual, OpCall, op_result
from spmd_mypy.representation import members, spmd_of, tensor_instance, typed_tensors_in
from spmd_stubs.core.torch_ops import OPS
from spmd_stubs.core.torch_ops.modules import BY_MODULE, CONTAINERS, INPUT, ModuleForm

_TORCH = "torch."


def forward_class(info: TypeInfo) -> TypeInfo | None:
    """The class whose ``forward`` a module's call runs (the first in its MRO that defines one)."""
    return next((cls for cls in info.mro if "forward" in cls.names), None)


def form_of(receiver: Instance) -> ModuleForm | None:
    """The functional form of a torch module, or of a subclass that keeps its ``forward``."""
    defining = forward_class(receiver.type)
    return BY_MODULE.get(defining.fullname) if defining is not None else None


def has_unknown_items(receiver: Instance) -> bool:
    """A module container that runs its items (``nn.Sequential``), or a value typed plain ``nn.Module``."""
    defining = forward_class(receiver.type)
    return receiver.type.fullname == MODULE or (defining is not None and defining.fullname in CONTAINERS)


def is_unmodelled(receiver: Instance) -> bool:
    """A torch module whose ``forward`` is torch's own and not in the table."""
    defining = forward_class(receiver.type)
    return (defining is not None and defining.fullname.startswith(_TORCH) and defining.fullname != MODULE
            and defining.fullname not in BY_MODULE and defining.fullname not in CONTAINERS)


def typed_call(ctx: MethodContext, receiver: Instance, form: ModuleForm) -> Type | None:
    """``module(x)`` judged as the form's op; None where the call is not ``module(x)`` with one input, or
    where nothing in it is typed (mypy's own verdict stands on untyped code)."""
    argument = _argument(ctx)
    if argument is None:
        return None
    if form.op is None:
        return argument.type if typed_tensors_in(argument.type) else None
    config = state_of(ctx.api).settings
    declared = {name: _declared(receiver.type, name) for name in form.attributes}
    if config.strict and typed_tensors_in(argument.type):
        unknown = [name for name, typ in declared.items() if typ is None or _has_unknown_tensor(typ)]
        if unknown:
            untyped_boundaries.untyped_module_parameters(ctx, _shown_class(receiver), form.op, unknown,
                                                         argument.type)
    # An attribute of no known type is an unknown operand (as an absent one is); Any would read as a python number.
    attributes = {name: typ if typ is not None and not isinstance(get_proper_type(typ), AnyType) else NoneType()
                  for name, typ in declared.items()}
    operands = [[argument] if operand == INPUT else [Actual(None, attributes[operand])] if operand else []
                for operand in form.operands]
    record = OPS[form.op]
    # A module's settings (dim, normalized_shape) are not read: a shape rule that needs them has none here.
    refine = refiner(ctx.api, ctx.context, record, form.op, CallArgs({}, None))
    call = OpCall(form.op, operands, ctx.context, ctx.api, config, record, refine)
    return op_result(call, declared_result(ctx.default_return_type, [argument.type, *attributes.values()]))


def report_unmodelled(ctx: MethodContext, receiver: Instance) -> None:
    """A typed tensor passed to a torch module the table does not model (strict)."""
    typed = [t for types in ctx.arg_types for t in types if typed_tensors_in(t)]
    if not typed:
        return
    name = _shown_class(receiver)
    shown = ", ".join(format_type_bare(t, ctx.api.options) for t in typed)
    report.fail(ctx.api, ctx.context,
                f"{name} is not modelled by the SPMD checker: the {shown} it takes gives a result of unknown "
                f"SPMD type. Fix: y = assert_type(y, <type>@<axis>) on the result, or add {name}'s form to "
                "spmd_stubs/core/torch_ops/modules.py.", errorcodes.UNMODELLED)


def _argument(ctx: MethodContext) -> Actual | None:
    """The one input of ``module(x)`` (or ``module(input=x)``)."""
    given = [(expr, typ, kind, name)
             for exprs, types, kinds, names in zip(ctx.args, ctx.arg_types, ctx.arg_kinds, ctx.arg_names)
             for expr, typ, kind, name in zip(exprs, types, kinds, names)]
    if len(given) != 1:
        return None
    expr, typ, kind, name = given[0]
    return Actual(expr, typ) if kind == ARG_POS or (kind == ARG_NAMED and name == "input") else None


def _declared(info: TypeInfo, name: str) -> Type | None:
    """The type the class (or the nearest base) declares for attribute ``name``; None where none is known."""
    symbol = info.get(name)
    node = symbol.node if symbol is not None else None
    return node.type if isinstance(node, Var) else None


def _has_unknown_tensor(typ: Type) -> bool:
    """Whether ``typ`` is Any or has a tensor member without an SPMD type (torch's ``Parameter``)."""
    return any(isinstance(member, AnyType) or (tensor_instance(member) is not None and spmd_of(member) is None)
               for member in members(typ))


def _shown_class(receiver: Instance) -> str:
    """``nn.Linear`` for torch's class, the class's own name for a subclass."""
    info = receiver.type
    return f"nn.{info.name}" if info.fullname.startswith("torch.nn.") else info.name
