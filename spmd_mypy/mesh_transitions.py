"""``reinterpret_mesh``: a value moved to another mesh over the same ranks (docs/spec.md#meshes-over-the-same-ranks).

* ``spmd_stubs.reinterpret_mesh(x, {(cp, tp): ep})``: the regrouping is
  written in the call, each key and value an axis or a tuple of axes; the
  result is :func:`spmd_stubs.core.mesh_transitions.regroup` of x's type.
* spmd_types' ``reinterpret_mesh(x, {axis: T, ...})``: the destination type
  is written, its grouping left to the meshes' layouts at run time; what holds
  under any grouping is checked
  (:func:`spmd_stubs.core.mesh_transitions.check_declared_move`) and the
  result is the declared type.

A regrouping or a destination type that cannot be read keeps mypy's type.

With ``[spmd_mypy] meshes`` declared, a call passing a value of one mesh to a
parameter typed on another is ``spmd-mesh``
(:func:`spmd_stubs.core.mesh_transitions.check_one_mesh`).
"""

from __future__ import annotations

from typing import Callable

from mypy.nodes import DictExpr, Expression
from mypy.plugin import FunctionContext, FunctionSigContext, MethodSigContext
from mypy.types import CallableType, FunctionLike, Type

from spmd_mypy import report
from spmd_mypy.annotations import axes_of
from spmd_mypy.call_arguments import arguments
from spmd_mypy.config import Config
from spmd_mypy.inference import type_of
from spmd_mypy.representation import result_type, spmd_members, spmd_of
from spmd_mypy.spmd_types_api.reading import site_of, tensor_type
from spmd_stubs.core import SpmdTypeError, TensorType
from spmd_stubs.core.mesh_transitions import Regrouping, check_declared_move, check_one_mesh, regroup

SignatureHook = Callable[[FunctionSigContext | MethodSigContext], FunctionLike]


def reinterpret_mesh_hook(ctx: FunctionContext) -> Type:
    """``spmd_stubs.reinterpret_mesh(x, groups)``."""
    args = arguments(ctx)
    if "x" not in args or "groups" not in args:
        return ctx.default_return_type
    groups = _regrouping(args["groups"][0])
    if groups is None:
        return ctx.default_return_type
    results: list[TensorType | None] = []
    for member in spmd_members(args["x"][1]):
        try:
            results.append(regroup(member, groups) if member is not None else None)
        except SpmdTypeError as error:
            report.rule_error(ctx.api, ctx.context, error)
            return ctx.default_return_type
    return result_type(ctx.api, ctx.default_return_type, results) if results else ctx.default_return_type


def _regrouping(expr: Expression) -> Regrouping | None:
    if not isinstance(expr, DictExpr):
        return None
    groups = []
    for key, value in expr.items:
        source = axes_of(key) if key is not None else None
        destination = axes_of(value)
        if source is None or destination is None:
            return None
        groups.append((source, destination))
    return tuple(groups)


def spmd_types_reinterpret_mesh_hook(settings: Config) -> Callable[[FunctionContext], Type]:
    """spmd_types' ``reinterpret_mesh(tensor, type)``, ``type`` a dict of types (or names holding one)."""

    def hook(ctx: FunctionContext) -> Type:
        site = site_of(ctx, settings)
        args = arguments(ctx)
        if site is None or "tensor" not in args or "type" not in args:
            return ctx.default_return_type
        declared = tensor_type([args["type"][0]], site) if isinstance(args["type"][0], DictExpr) else None
        if declared is None:
            return ctx.default_return_type
        for member in spmd_members(args["tensor"][1]):
            if member is None:
                continue
            try:
                check_declared_move(member, declared.as_dict())
            except SpmdTypeError as error:
                report.rule_error(ctx.api, ctx.context, error)
                break
        return result_type(ctx.api, ctx.default_return_type, [declared])

    return hook


def checking_meshes(signature_hook: SignatureHook, meshes: tuple[tuple[str, tuple[str, ...]], ...]) -> SignatureHook:
    """``signature_hook``, after checking that each typed argument is on its parameter's mesh."""
    declared_meshes = dict(meshes)

    def hook(ctx: FunctionSigContext | MethodSigContext) -> FunctionLike:
        signature = ctx.default_signature
        if isinstance(signature, CallableType):
            for formal, name, exprs in zip(signature.arg_types, signature.arg_names, ctx.args):
                declared = spmd_of(formal)
                if declared is None or not exprs:
                    continue
                for actual in dict.fromkeys(spmd_members(type_of(ctx.api, exprs[0], formal))):
                    if actual is None:
                        continue
                    try:
                        check_one_mesh(declared, actual, declared_meshes, f"argument {name or 'passed'}")
                    except SpmdTypeError as error:
                        report.rule_error(ctx.api, ctx.context, error)
                        break
        return signature_hook(ctx)

    return hook
