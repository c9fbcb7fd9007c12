"""The loss rule and gradient types.

* ``loss.backward()``, ``torch.autograd.backward(loss)`` and
  ``torch.autograd.grad(loss, inputs)`` with no explicit gradient seed 1.0 on
  every rank: the loss must be I or P on every typed axis
  (:func:`spmd_stubs.core.check_loss`, ``spmd-backward``).
* ``p.grad`` has the dual of ``p``'s type on every axis (R<->P, I, V).
* A gradient buffer (``p.grad``, or a local bound to one: :func:`gradient_buffer`)
  takes the gradient after its reductions (:func:`spmd_stubs.core.takes_reduced_gradient`),
  whether assigned (``p.grad = ...``) or written in place (``g.copy_(...)``,
  ``g[i] = ...``, ``all_reduce_(g, ...)``, ``out=g``).
"""

from __future__ import annotations

import itertools
from typing import Callable

from mypy.nodes import (
    ARG_POS,
    AssignmentStmt,
    CallExpr,
    Expression,
    ForStmt,
    GeneratorExpr,
    ListComprehension,
    ListExpr,
    MemberExpr,
    NameExpr,
    RefExpr,
    StarExpr,
    Statement,
    TupleExpr,
)
from mypy.plugin import AttributeContext, CheckerPluginInterface, FunctionContext, MethodContext
from mypy.types import NoneType, Type, get_proper_type

from spmd_mypy import report
from spmd_mypy.fixes import Operand
from spmd_mypy.gradients import current_function
from spmd_mypy.inference import Actual, tensors_in, type_of
from spmd_mypy.representation import members, result_type, spmd_members, tensor_instance
from spmd_mypy.statements import statements_in
from spmd_stubs import core
from spmd_stubs.core import SpmdTypeError, TensorType


def _explicit(types: list[Type]) -> bool:
    """An explicit gradient was passed (not absent, not None)."""
    return any(not isinstance(get_proper_type(m), NoneType) for t in types for m in members(t))


def _check(losses: list[Actual], call: str, ctx: MethodContext | FunctionContext) -> None:
    for loss in losses:
        for member in spmd_members(loss.type):
            for axis, axis_type in member.axes if member is not None else ():
                try:
                    core.check_loss(axis_type, axis, call)
                except SpmdTypeError as error:
                    report.rule_error(ctx.api, ctx.context, error, [Operand(loss.expr, axis_type)])


def backward_method(ctx: MethodContext) -> Type:
    """``loss.backward(gradient=None)``."""
    gradient = [t for name, types in zip(ctx.callee_arg_names, ctx.arg_types) if name == "gradient" for t in types]
    if not _explicit(gradient):
        receiver = ctx.context.callee.expr if isinstance(ctx.context, CallExpr) and isinstance(
            ctx.context.callee, MemberExpr) else None
        _check([Actual(receiver, ctx.type)], "backward()", ctx)
    return ctx.default_return_type


def autograd_hook(outputs: str, gradients: str, call: str) -> Callable[[FunctionContext], Type]:
    """``torch.autograd.backward(tensors, grad_tensors)`` / ``grad(outputs, inputs, grad_outputs)``."""

    def hook(ctx: FunctionContext) -> Type:
        by_name = {name: (exprs, types) for name, exprs, types in zip(ctx.callee_arg_names, ctx.args, ctx.arg_types)}
        exprs, types = by_name.get(outputs, ([], []))
        if not _explicit(by_name.get(gradients, ([], []))[1]):
            _check(list(tensors_in([Actual(e, t) for e, t in zip(exprs, types)], ctx.api)), call, ctx)
        return ctx.default_return_type

    return hook


def grad_attribute(ctx: AttributeContext) -> Type:
    """``p.grad``: the dual type of ``p`` (or None, as declared).

    Written (``p.grad = ...``), it also takes the gradient after its reduction,
    the data-parallel sync every trainer writes:
    ``p.grad = all_reduce(p.grad, dp, src=P, dst=R)`` (or ``dst=I``).  A read
    is still the dual (the type cannot follow the write), so the update takes
    the synced value from the local it was computed in (docs/porting.md).
    """
    duals = [_dual(member) for member in spmd_members(ctx.type)]
    if not any(d is not None for d in duals):
        return ctx.default_attr_type
    if ctx.is_lvalue:
        return result_type(ctx.api, ctx.default_attr_type, [r for d in duals for r in (_reduced(d) if d is not None else [d])])
    return result_type(ctx.api, ctx.default_attr_type, duals)


def _reduced(tensor_type: TensorType) -> list[TensorType]:
    """The gradient after any of its pending reductions were done (each Partial axis P, R or I)."""
    options = [[(axis, t), *((axis, done) for done in (core.Replicate, core.Invariant)
                             if core.takes_reduced_gradient(t, done))]
               for axis, t in tensor_type.axes]
    return [TensorType(tuple(axes)) for axes in itertools.product(*options)]


def _occurrences(target: Expression, name: str) -> int:
    """How many times an assignment target binds ``name``."""
    if isinstance(target, NameExpr):
        return int(target.name == name)
    if isinstance(target, (TupleExpr, ListExpr)):
        return sum(_occurrences(item, name) for item in target.items)
    if isinstance(target, StarExpr):
        return _occurrences(target.expr, name)
    return 0


def gradient_buffer(expr: Expression | None, api: CheckerPluginInterface) -> bool:
    """Whether ``expr`` is a tensor's gradient buffer: ``p.grad`` of a tensor ``p``, or a local name every
    binding of which in the function is one.

    A binding is ``g = p.grad`` (or ``g = h`` of another such local), or a loop
    over gradients: ``for g in grads``, ``for g, s in zip(grads, synced)``,
    ``for i, g in enumerate(grads)``, where ``grads`` is a list or tuple display
    or a comprehension of gradient buffers (``[p.grad for p in params]``), or
    a local every assignment of which is one.  A copy (``p.grad.clone()``) is
    no alias: writes into it never reach the gradient.
    """
    return expr is not None and _Aliases(api).buffer(expr)


class _Aliases:
    """One question about one written tensor: each name is judged once, and a name met again while it is
    being judged (``g = g``) binds no gradient buffer there."""

    def __init__(self, api: CheckerPluginInterface) -> None:
        self.api = api
        function = current_function(api)
        self.body = function.body if function is not None else None
        self.parameters = {argument.variable.name for argument in function.arguments} if function is not None else set()
        self.judged: dict[tuple[str, bool], bool] = {}

    def buffer(self, expr: Expression) -> bool:
        """``expr`` is a gradient buffer."""
        if isinstance(expr, MemberExpr) and expr.name == "grad":
            return self._tensor(expr.expr)
        return isinstance(expr, NameExpr) and self._every_binding(expr.name, collection=False)

    def collection(self, expr: Expression) -> bool:
        """``expr`` holds gradient buffers, item by item."""
        if isinstance(expr, (ListExpr, TupleExpr)):
            return bool(expr.items) and all(self.buffer(item) for item in expr.items)
        if isinstance(expr, (ListComprehension, GeneratorExpr)):
            generator = expr.generator if isinstance(expr, ListComprehension) else expr
            return self.buffer(generator.left_expr)
        return isinstance(expr, NameExpr) and self._every_binding(expr.name, collection=True)

    def _every_binding(self, name: str, collection: bool) -> bool:
        key = (name, collection)
        if self.body is None or name in self.parameters:
            return False  # a parameter is bound by the caller
        if key not in self.judged:
            self.judged[key] = False  # while it is judged
            found = [judge for statement in statements_in(self.body) for judge in self._bindings(statement, name, collection)]
            self.judged[key] = bool(found) and all(found)
        return self.judged[key]

    def _bindings(self, statement: Statement, name: str, collection: bool) -> list[bool]:
        """For each binding of ``name`` in ``statement``, whether it binds a gradient buffer (a collection of them)."""
        found: list[bool] = []
        if isinstance(statement, AssignmentStmt):
            for target in statement.lvalues:
                found += self._bound(target, statement.rvalue, name, collection, loop=False)
        elif isinstance(statement, ForStmt):
            found += self._bound(statement.index, statement.expr, name, collection, loop=True)
        return found

    def _bound(self, target: Expression, value: Expression, name: str, collection: bool, loop: bool) -> list[bool]:
        """The bindings of ``name`` by ``target = value`` (``for target in value`` where ``loop``)."""
        if isinstance(target, NameExpr):
            if target.name != name:
                return []
            if loop:
                return [not collection and self.collection(value)]
            return [self.collection(value) if collection else self.buffer(value)]
        if not isinstance(target, (TupleExpr, ListExpr)):
            return []
        if any(isinstance(item, StarExpr) for item in target.items):
            return [False] * _occurrences(target, name)  # the positions are not followed past a starred item
        found: list[bool] = []
        for position, item in enumerate(target.items):
            part = self._part(value, position, len(target.items), loop)
            if part is None:
                found += [False] * _occurrences(item, name)  # an unpacking the walk does not follow
            else:
                found += self._bound(item, part[0], name, collection, loop=part[1])
        return found

    def _part(self, value: Expression, position: int, size: int, loop: bool) -> tuple[Expression, bool] | None:
        """What item ``position`` of an unpacking binds, and whether it is a loop over it: a display's item, or
        in a loop over ``zip(a, b)`` / ``enumerate(a)`` the position's argument (None: not known)."""
        if not loop:
            if isinstance(value, (TupleExpr, ListExpr)) and len(value.items) == size:
                return value.items[position], False
            return None
        if isinstance(value, CallExpr) and isinstance(value.callee, RefExpr):
            iterated = [arg for arg, kind in zip(value.args, value.arg_kinds) if kind == ARG_POS]
            if value.callee.fullname == "builtins.zip" and len(iterated) == size:
                return iterated[position], True
            if value.callee.fullname == "builtins.enumerate" and size == 2 and position == 1 and iterated:
                return iterated[0], True
        return None

    def _tensor(self, expr: Expression) -> bool:
        """``expr`` is a tensor (each member of its union, None aside): another object's ``grad`` is no gradient."""
        found = members(type_of(self.api, expr))
        return any(tensor_instance(m) is not None for m in found) and all(
            tensor_instance(m) is not None or isinstance(get_proper_type(m), NoneType) for m in found
        )


def _dual(tensor_type: TensorType | None) -> TensorType | None:
    if tensor_type is None:
        return None
    return TensorType(tuple((axis, core.dual(t)) for axis, t in tensor_type.axes))
