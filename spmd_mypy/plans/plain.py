"""Which parameters a torch module the plan gives no style holds: those are plain tensors, ``I`` on the axis.

``parallelize_module`` turns only the planned modules' parameters into
DTensors; any other parameter stays a plain tensor, the same on every rank,
whose gradient nothing reduces across the plan's axis: ``I`` there
(docs/spec.md#dtensor-plans).  Whether one of ``nn.Linear``,
``nn.Embedding``, ``nn.LayerNorm`` or ``nn.RMSNorm`` has its ``bias`` or
``weight`` is read from the constructor call in the owner's ``__init__``
(``bias=False``, ``elementwise_affine=False``): a parameter whose flag is
not a literal, or a module built elsewhere, is not known to exist.  A class
of the user's (``RMSNorm`` with ``self.weight = nn.Parameter(torch.ones(dim))``)
holds the parameters its methods assign ``self.X = nn.Parameter(...)``, where
those are all it can hold: its bases are its own classes and ``nn.Module``,
and no method registers one otherwise (``register_parameter``, ``setattr``).
"""

from __future__ import annotations

import ast
from typing import Mapping

from mypy.checker import TypeChecker
from mypy.nodes import TypeInfo

from spmd_mypy.plans.tree import Node, class_def, construction, torch_names

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


_ONLY_TORCH_BASES = frozenset({"torch.nn.modules.module.Module", "builtins.object"})
_REGISTERING = frozenset({"register_parameter", "setattr", "__setattr__", "register_module", "add_module",
                          "_parameters"})
"""Names through which a class may hold parameters its ``self.X = nn.Parameter(...)`` do not show."""


def user_parameters(api: TypeChecker, info: TypeInfo) -> frozenset[str] | None:
    """The parameters of a module of the user's class ``info``; None where they are not all visible."""
    found: set[str] = set()
    for base in info.mro:
        if base.fullname in _ONLY_TORCH_BASES:
            continue
        cls = class_def(api, base) if not base.fullname.startswith("torch.") else None
        if cls is None:
            return None
        torch = torch_names(api, base.module_name)
        for node in ast.walk(cls):
            if isinstance(node, (ast.Name, ast.Attribute)) and (node.id if isinstance(node, ast.Name)
                                                               else node.attr) in _REGISTERING:
                return None
            if isinstance(node, ast.Assign) and _is_parameter(node.value, torch):
                targets = [t for t in node.targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                           and t.value.id == "self"]
                if len(targets) != len(node.targets):
                    return None
                found.update(t.attr for t in targets)
    return frozenset(found)


def _is_parameter(value: ast.expr, torch: frozenset[str]) -> bool:
    """``nn.Parameter(...)``, ``torch.nn.Parameter(...)``, ``Parameter(...)`` imported from torch."""
    if not isinstance(value, ast.Call):
        return False
    callee = value.func
    if isinstance(callee, ast.Name):
        return callee.id == "Parameter" and callee.id in torch
    root = callee
    while isinstance(root, ast.Attribute):
        root = root.value
    return isinstance(callee, ast.Attribute) and callee.attr == "Parameter" and isinstance(root, ast.Name) \
        and root.id in torch
