"""The signature of every call of a user function: the global boundary, then axis polymorphism.

mypy asks this hook for each call of a function outside torch, builtins and
typing (:mod:`spmd_mypy.main` decides which).  The arguments' partition specs
are checked against a global callee's declared ones, the callee's axis
variables are instantiated from the arguments (:mod:`.polymorphism`), a
global axis the callee never mentions loses its partition spec, and a call
that is itself a global def's returned value is checked against that def.
"""

from __future__ import annotations

from mypy.plugin import FunctionSigContext, MethodSigContext
from mypy.types import CallableType, FunctionLike

from spmd_mypy import polymorphism
from spmd_mypy.global_mode.boundaries import check_arguments, check_returned, forget_passed_specs


def signature_hook(ctx: FunctionSigContext | MethodSigContext) -> FunctionLike:
    """Every user function's signature: the global boundary, then axis polymorphism."""
    check_arguments(ctx)
    signature = forget_passed_specs(ctx.api, ctx.default_signature, polymorphism.instantiate(ctx))
    if isinstance(signature, CallableType):
        check_returned(ctx.api, ctx.context, signature.ret_type)
    return signature
