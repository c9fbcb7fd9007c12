"""Flags per instance: a literal passed to a parameter named after a flag decides it for that call or object.

picotron gives ``gather_output=True`` to its LM head only; megatron passes
``tensor_parallel_output_grad=False`` to one call of a gather.  A literal
(``True``, ``False``, an int, a str, an enum member) passed to a parameter
whose name is a flag of the active configuration, or that parameter's
literal default where the call omits it (a default is read where the
callee is defined outside installed packages), decides that flag

* for that call: ``f(x, tensor_parallel_output_grad=False)``;
* for an object built by a constructor call, and so for its module calls
  ``receiver(x)``: the receiver is the construction itself
  (``Column(gather_output=True)(x)``), a local every assignment of which in
  its function is one, or ``self.head`` where every ``self.head = ...`` in
  the methods of its class, of its bases and of its subclasses in the
  module and theirs, and every ``head = ...`` in their bodies, is one, and the module
  assigns ``.head`` on nothing but a method's ``self`` (:mod:`.receivers`).  Every such construction must pass
  the same literal; otherwise the flag is undecided for the object.

In a run whose configuration gives the flag another value the call is not
judged: its arguments are not checked and its result is ``Any`` (a module
call's; a function's signature becomes ``(...) -> Any``).  Where they agree,
or the configuration does not set the flag, it is judged as before.  The
body of the callee is checked per configuration with the flag decided by
its name (:mod:`.conditions`), so each call is checked exactly in the
configurations that run it as they do.

Two kinds of ``spmd-configuration`` report what no run would check:

* a literal every configuration sets to another value (the instance's
  calls are judged in none), at the literal (at the call, for a default);
* strict mode: a call decided for one value taking, directly or through a
  local, the result of a call decided for another value of the same flag:
  the value between them is checked in no configuration.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence, Union

from mypy.argmap import map_actuals_to_formals
from mypy.nodes import (
    CallExpr,
    Decorator,
    Expression,
    FuncDef,
    MemberExpr,
    NameExpr,
    RefExpr,
    TypeInfo,
)
from mypy.plugin import CheckerPluginInterface, FunctionSigContext, MethodContext, MethodSigContext
from mypy.typeops import bind_self, type_object_type
from mypy.types import AnyType, CallableType, FunctionLike, Instance, Type, TypeOfAny, get_proper_type

from spmd_mypy import errorcodes, report
from spmd_mypy.build_state import state_of
from spmd_mypy.configurations.conditions import Constant, WrittenMember, literal_constant, same_value
from spmd_mypy.configurations.declared import Configuration, enum_member
from spmd_mypy.configurations.receivers import bound_values
from spmd_mypy.fullnames import APPLY_MODULE, ASSIGNED, CALLED_VALUE, RETURNED
from spmd_mypy.runtime_classes import declared_entry, find_class
from spmd_mypy.statements import defining_module
from spmd_mypy.wrappers import marked

SignatureContext = Union[FunctionSigContext, MethodSigContext]
SignatureHook = Callable[[SignatureContext], FunctionLike]
Decision = Mapping[str, tuple[Constant, Expression]]
"""Each flag a call or object decides -> the literal's value and the expression that wrote it (the call,
for a default)."""

_UNJUDGED = AnyType(TypeOfAny.special_form)


def judged_where_agreeing(judge: SignatureHook, configurations: tuple[Configuration, ...]) -> SignatureHook:
    """``judge`` for a call of a user function or class, except a function call whose literals disagree with
    the configuration: ``(...) -> Any`` (module docstring).  ``judge`` itself where no configuration is
    declared."""
    if not configurations:
        return judge

    def hook(ctx: SignatureContext) -> FunctionLike:
        signature = ctx.default_signature
        if not isinstance(signature, CallableType) or not isinstance(ctx.context, CallExpr):
            return judge(ctx)
        decision = _decided_by(signature, ctx.args, ctx.context, ctx.api)
        _report_uncovered(ctx.api, decision, configurations)
        if signature.is_type_obj():
            return judge(ctx)  # a construction decides for its object, judged at its module calls
        if _disagrees(decision, _active(ctx.api)):
            return signature.copy_modified(arg_types=[_UNJUDGED] * len(signature.arg_types), ret_type=_UNJUDGED)
        _report_crossings(ctx.api, decision, ctx.context)
        return judge(ctx)

    return hook


def unjudged_module_call(ctx: MethodContext) -> Type | None:
    """``module(x)`` where its object's constructions, or its own arguments to ``forward``, decide a flag
    otherwise than the configuration: ``Any``, nothing checked; None where it is judged."""
    receiver = get_proper_type(ctx.type)
    flags = _flags(ctx.api)
    if not flags or not isinstance(receiver, Instance) or not isinstance(ctx.context, CallExpr):
        return None
    constructor = get_proper_type(type_object_type(receiver.type, ctx.api.named_type))  # type: ignore[attr-defined]
    forward = _forward(receiver)
    decision: dict[str, tuple[Constant, Expression]] = {}
    if isinstance(constructor, CallableType) and not flags.isdisjoint(constructor.arg_names):
        decision.update(_object_decision(ctx.context.callee, ctx.api))
    if forward is not None and not flags.isdisjoint(forward.arg_names):
        called = _mapped(ctx.context, forward, ctx.api)
        _report_uncovered(ctx.api, called, state_of(ctx.api).settings.configurations)
        if _disagrees(called, _active(ctx.api)):
            return _UNJUDGED
        decision.update(called)
    if _disagrees(decision, _active(ctx.api)):
        return _UNJUDGED
    _report_crossings(ctx.api, decision, ctx.context)
    return None


def _forward(receiver: Instance) -> CallableType | None:
    """The receiver's ``forward``, bound to it, where its class defines one with a signature."""
    method = receiver.type.get_method("forward")
    node = method.func if isinstance(method, Decorator) else method
    signature = node.type if isinstance(node, FuncDef) else None
    bound = bind_self(signature, receiver) if isinstance(signature, CallableType) else None
    return bound if isinstance(bound, CallableType) else None


def _flags(api: CheckerPluginInterface) -> set[str]:
    """Every flag some configuration sets."""
    return {flag for configuration in state_of(api).settings.configurations for flag, _ in configuration.flags}


def _active(api: CheckerPluginInterface) -> Configuration | None:
    return state_of(api).settings.configuration


def _disagrees(decision: Decision, configuration: Configuration | None) -> bool:
    flags = dict(configuration.flags) if configuration is not None else {}
    return any(flag in flags and same_value(flags[flag], value) is False for flag, (value, _) in decision.items())


# ---------------------------------------------------------------------- what no run checks


def _report_uncovered(api: CheckerPluginInterface, decision: Decision,
                      configurations: tuple[Configuration, ...]) -> None:
    """A literal every configuration sets its flag against: the calls it decides are judged in none."""
    for flag, (value, written) in decision.items():
        values = [dict(c.flags).get(flag) for c in configurations]
        if any(v is None or same_value(v, value) is not False for v in values):
            continue
        wanted = _as_configured(flag, value, configurations)
        given = ", ".join(f"{c.name}: {flag} = {_shown(v)}" for c, v in zip(configurations, values))
        report.fail(
            api, written,
            f"{flag}={_as_written(value)} is given by no configuration ({given}), "
            f"so the calls it decides are checked in none. Fix: add a configuration with {flag} = {wanted} "
            "to [spmd_mypy] configurations (docs/spec.md#flags-per-instance).",
            errorcodes.CONFIGURATION,
        )


def _report_crossings(api: CheckerPluginInterface, decision: Decision, call: CallExpr) -> None:
    """Strict: an argument that is, directly or through a local, the result of a call decided for another
    value of one of ``decision``'s flags."""
    if not decision or not state_of(api).settings.strict:
        return
    for argument in call.args:
        passed = _unwrapped(argument)
        sources = [passed] if isinstance(passed, CallExpr) else bound_values(passed, api) if isinstance(
            passed, NameExpr) else []
        for source in sources:
            source = _unwrapped(source) if source is not None else None
            other = _call_decision(source, api) if isinstance(source, CallExpr) else {}
            for flag, (value, _) in decision.items():
                if flag in other and not _equal(other[flag][0], value):
                    report.fail(
                        api, argument,
                        f"this value comes from a call checked only where {flag} = {_shown(other[flag][0])} and is "
                        f"passed to one checked only where {flag} = {_shown(value)}: no configuration checks it "
                        f"between them. Fix: state its type where it is passed, spmd.assert_type(<it>, <its type "
                        f"where {flag} = {_shown(other[flag][0])}>): that configuration checks it, the other "
                        "assumes it (docs/spec.md#flags-per-instance).",
                        errorcodes.CONFIGURATION,
                    )
                    return


def _unwrapped(expr: Expression) -> Expression:
    """``expr`` without the calls strict mode puts around a call of an attribute (:mod:`spmd_mypy.wrappers`)."""
    while isinstance(expr, CallExpr) and any(marked(expr, marker) for marker in (ASSIGNED, CALLED_VALUE, RETURNED)):
        expr = expr.args[0]
    return expr


def _call_decision(call: CallExpr, api: CheckerPluginInterface) -> Decision:
    """What ``call`` decides: a module call's object and arguments to ``forward``, or a function's literals."""
    callee = api.lookup_type_or_none(call.callee)  # type: ignore[attr-defined]
    proper = get_proper_type(callee) if callee is not None else None
    if isinstance(proper, Instance):
        forward = _forward(proper)
        return {**_object_decision(call.callee, api), **(_mapped(call, forward, api) if forward is not None else {})}
    if isinstance(proper, CallableType) and not proper.is_type_obj():
        return _mapped(call, proper, api)
    return {}


def _as_written(value: Constant) -> str:
    return repr(value) if not isinstance(value, WrittenMember) else f"{value.class_name}.{value.name}"


def _shown(value: object) -> str:
    """A value as a configuration writes it (``true``, ``3``, ``REDUCE_SCATTER``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, WrittenMember):
        return f"{value.class_name}.{value.name}"
    return str(value)


def _as_configured(flag: str, value: Constant, configurations: tuple[Configuration, ...]) -> str:
    """``value`` as a configuration would set ``flag`` to it: a member qualified where the others qualify."""
    if isinstance(value, WrittenMember):
        qualified = any(enum_member(v) is not None for c in configurations for f, v in c.flags if f == flag)
        return f"{value.class_name}.{value.name}" if qualified else value.name
    if isinstance(value, str) and not value.isidentifier():
        return f'"{value}"'
    return _shown(value)


# ---------------------------------------------------------------------- what a call decides


def _decided_by(signature: CallableType, formal_args: Sequence[Sequence[Expression]], call: CallExpr,
                api: CheckerPluginInterface) -> Decision:
    """The flags ``call`` decides by a literal argument, or by a parameter's literal default it omits."""
    flags = _flags(api)
    decision: dict[str, tuple[Constant, Expression]] = {}
    for index, name in enumerate(signature.arg_names):
        if name not in flags or index >= len(formal_args):
            continue
        given = formal_args[index]
        written = given[0] if len(given) == 1 else None if given else _default(signature, name, api)
        value = literal_constant(written) if written is not None else None
        if value is not None and written is not None:
            decision[name] = (value, written if given else call)
    return decision


def _mapped(call: CallExpr, signature: CallableType, api: CheckerPluginInterface) -> Decision:
    """:func:`_decided_by` for ``call`` of ``signature``, its arguments matched to the parameters here."""
    mapped = map_actuals_to_formals(call.arg_kinds, call.arg_names, signature.arg_kinds, signature.arg_names,
                                    lambda _: AnyType(TypeOfAny.special_form))
    return _decided_by(signature, [[call.args[i] for i in actuals] for actuals in mapped], call, api)


def _default(signature: CallableType, name: str, api: CheckerPluginInterface) -> Expression | None:
    """Parameter ``name``'s default, where it is defined outside installed packages (so always parsed: a
    module that names a flag is parsed afresh every run, mypy's cache keeps no defaults)."""
    from spmd_mypy.hooks import installed  # hooks imports this module

    definition = signature.definition
    modules = getattr(api, "modules", {})
    module = defining_module(definition.fullname, modules) if isinstance(definition, FuncDef) else None
    if module is None or installed(module.fullname, module.path):
        return None
    arguments = getattr(definition, "arguments", None) or []
    return next((a.initializer for a in arguments if a.variable.name == name), None)


def _construction_decision(call: CallExpr, api: CheckerPluginInterface) -> Decision | None:
    """What a constructor call decides for its object; None where ``call`` is not a class's."""
    callee = call.callee
    if not isinstance(callee, RefExpr) or not isinstance(callee.node, TypeInfo):
        return None
    constructor = get_proper_type(type_object_type(callee.node, api.named_type))  # type: ignore[attr-defined]
    return _mapped(call, constructor, api) if isinstance(constructor, CallableType) else None


def _object_decision(receiver: Expression, api: CheckerPluginInterface) -> Decision:
    """The flags every construction ``receiver`` is followed to decides alike (module docstring), or what a
    ``modules`` entry declares for it (:func:`_declared_decision`)."""
    receiver = _module_itself(receiver)
    declared = _declared_decision(receiver, api)
    if declared is not None:
        return declared
    decisions = [_construction_decision(value, api) if isinstance(value, CallExpr) else None
                 for value in bound_values(receiver, api)]
    if not decisions or any(d is None for d in decisions):
        return {}
    first, *others = [d for d in decisions if d is not None]
    return {flag: written for flag, written in first.items()
            if all(flag in other and _equal(other[flag][0], written[0]) for other in others)}


def _module_itself(receiver: Expression) -> Expression:
    """``m`` for megatron's ``apply_module(m)``, which returns ``m``."""
    while (isinstance(receiver, CallExpr) and isinstance(receiver.callee, RefExpr)
           and receiver.callee.fullname == APPLY_MODULE and receiver.args):
        receiver = receiver.args[0]
    return receiver


def _declared_decision(receiver: Expression, api: CheckerPluginInterface) -> Decision | None:
    """``self.head`` where ``[spmd_mypy] modules`` declares the class it holds at run time: the entry's literal
    arguments, and the declared class's defaults for the flags they omit (the construction the code writes
    is not the layer that runs); None where no entry declares it."""
    if not isinstance(receiver, MemberExpr):
        return None
    owner = api.lookup_type_or_none(receiver.expr)  # type: ignore[attr-defined]
    entry = declared_entry(owner, receiver.name, state_of(api).settings.modules) if owner is not None else None
    if entry is None:
        return None
    found = find_class(state_of(api).values.modules, entry.cls)
    if not isinstance(found, TypeInfo):
        return {}  # the read reports the entry
    flags = _flags(api)
    decision: dict[str, tuple[Constant, Expression]] = {
        name: (value, receiver) for name, value in entry.arguments if name in flags}
    constructor = get_proper_type(type_object_type(found, api.named_type))  # type: ignore[attr-defined]
    if isinstance(constructor, CallableType):
        for name in flags.intersection(n for n in constructor.arg_names if n is not None) - set(decision):
            default = _default(constructor, name, api)
            value = literal_constant(default) if default is not None else None
            if value is not None:
                decision[name] = (value, receiver)
    return decision


def _equal(left: Constant, right: Constant) -> bool:
    return type(left) is type(right) and left == right
