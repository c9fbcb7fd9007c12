"""A python number on the left of an operator: ``1.0 - p``, ``2 / v``, ``1 - smoothing * v``.

mypy checks ``1.0 + p`` as ``float.__add__(p)`` first, which does not take
a tensor, and then as ``p.__radd__(1.0)``; when that one reports an SPMD
error, mypy shows the first attempt's generic "Unsupported operand types"
instead.  So where the right operand has an SPMD type, the number's
operator takes it and is judged here, as written: its result is the
tensor's, and its error (with the axis and the fix) is the one mypy shows.
Elsewhere the number's own signature stands.
"""

from __future__ import annotations

from typing import Callable

from mypy.nodes import OpExpr
from mypy.plugin import MethodSigContext
from mypy.types import FunctionLike

from spmd_mypy.calls import display_name
from spmd_mypy.config import Config
from spmd_mypy.inference import Actual, OpCall, op_result, type_of
from spmd_mypy.representation import has_spmd, result_type
from spmd_stubs.core.torch_ops import BINARY_OPERATORS, lookup

NUMBERS = ("builtins.int.", "builtins.float.", "builtins.bool.")
OPERATORS = frozenset(f"__{word}__" for word in BINARY_OPERATORS if hasattr(0.0, f"__{word}__"))
"""The operators every Python number has: a float has no ``&``, ``|``, ``^``, and no number has ``@``."""


def operator_of(fullname: str) -> str | None:
    """``__add__`` for ``builtins.float.__add__`` (a number's binary operator), else None."""
    for prefix in NUMBERS:
        if fullname.startswith(prefix) and fullname[len(prefix):] in OPERATORS:
            return fullname[len(prefix):]
    return None


def signature_hook(name: str, config: Config) -> Callable[[MethodSigContext], FunctionLike]:
    """``number.__op__(tensor)``: the op on (number, tensor), as a signature taking the tensor."""
    record = lookup(name)  # judged as written: the number is the left operand

    def hook(ctx: MethodSigContext) -> FunctionLike:
        signature = ctx.default_signature
        if record is None or not isinstance(ctx.context, OpExpr) or [len(a) for a in ctx.args] != [1]:
            return signature
        tensor_expr = ctx.args[0][0]
        tensor = type_of(ctx.api, tensor_expr)
        if not has_spmd(tensor):
            return signature
        operands = [[Actual(ctx.context.left, ctx.type)], [Actual(tensor_expr, tensor)]]
        call = OpCall(display_name(name), operands, ctx.context, ctx.api, config, record)
        typed = op_result(call, tensor)
        # A tensor either way, never the number's own result type: unknown where nothing is typed.
        ret_type = result_type(ctx.api, tensor, [None]) if typed is None else typed
        return signature.copy_modified(arg_types=[tensor], ret_type=ret_type)

    return hook
