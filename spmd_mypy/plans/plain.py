"""Which parameters a torch module the plan gives no style holds: those are plain tensors, ``I`` on the axis.

``parallelize_module`` turns only the planned modules' parameters into
DTensors; any other parameter stays a plain tensor, the same on every rank,
whose gradient nothing reduces across the plan's axis: ``I`` there
(docs/spec.md#dtensor-plans).  Whether one of ``nn.Linear``,
``nn.Embedding``, ``nn.LayerNorm`` or ``nn.RMSNorm`` has its ``bias`` or
``weight`` is read from the constructor call in the owner's ``__init__``
(``bias=False``, ``elementwise_affine=False``): a parameter whose flag is
not a literal, or a module built elsewhere, is not known to exist.
"""

from __future__ import annotations

import ast
from typing import Mapping

from mypy.checker import TypeChecker

from spmd_mypy.plans.tree import Node, construction

_FLAGS: Mapping[str, Mapping[str, tuple[tuple[str, int], ...]]] = {
    "torch.nn.modules.linear.Linear": {"weight": (), "bias": (("bias", 2),)},
    "torch.nn.modules.sparse.Embedding": {"weight": ()},
    "torch.nn.modules.normalization.LayerNorm": {
        "weight": (("elementwise_affine", 2),), "bias": (("elementwise_affine", 2), ("bias", 3))},
    "torch.nn.modules.normalization.RMSNorm": {"weight": (("elementwise_affine", 2),)},
}
"""Per torch module class: each parameter, and the constructor flags (keyword, position) that drop it."""


def held_parameters(api: TypeChecker, owner: Node, node: Node) -> dict[str, bool | None]:
    """Per parameter of the torch module ``node`` (an attribute of ``owner``): whether it exists (None: not
    known).  Empty for a class not listed (a subclass may build its parameters otherwise)."""
    flags = _FLAGS.get(node.info.fullname, {}) if node.info is not None else {}
    name = node.path.rpartition(".")[2]
    call = construction(api, owner.info, name) if owner.info is not None and flags else None
    return {parameter: _held(call, dropped_by) for parameter, dropped_by in flags.items()}


def _held(call: ast.Call | None, dropped_by: tuple[tuple[str, int], ...]) -> bool | None:
    if call is None or any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords):
        return None
    for keyword, position in dropped_by:
        given = [k.value for k in call.keywords if k.arg == keyword] or call.args[position:position + 1]
        if not given:
            continue
        if not (isinstance(given[0], ast.Constant) and isinstance(given[0].value, bool)):
            return None
        if not given[0].value:
            return False
    return True
