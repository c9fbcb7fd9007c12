"""Parameters declared on a subclass of a torch module: ``class ColumnLinear(nn.Linear): weight: Tensor[S(0)@tp]``.

torch's modules assign their parameters in ``__init__`` (``self.weight =
Parameter(...)``), so mypy infers ``Parameter`` for ``Linear.weight`` and
``Linear.bias``, and a subclass that declares what the parameter holds
(``Tensor[S(0)@tp]``, ``Optional[Tensor[S(0)@tp]]``) is an incompatible
override in plain mypy.  The declaration is the one place a user can state
a torch module's SPMD types without editing torch, so a class-level
declaration that gives an SPMD type to a name its bases type without one
is allowed to differ from them (docs/spec.md#torchnn-modules), and so is
``bias: None``, which declares that the subclass has no such parameter.

Only such names: a base that already declares an SPMD type keeps mypy's
override check, so a subclass cannot silently change a typed layout.
"""

from __future__ import annotations

from mypy.nodes import TypeInfo, Var
from mypy.plugin import ClassDefContext
from mypy.types import NoneType, Type, get_proper_type

from spmd_mypy.representation import typed_tensors_in


def allow_declared_parameters(ctx: ClassDefContext) -> None:
    """Let the class's SPMD declarations override names its bases declare without an SPMD type."""
    info = ctx.cls.info
    for name, symbol in info.names.items():
        var = symbol.node
        if not isinstance(var, Var) or var.is_inferred or var.type is None or not _declares_layout(var.type):
            continue
        if _bases_declare_untyped(info, name):
            var.allow_incompatible_override = True


def _declares_layout(declared: Type) -> bool:
    """An SPMD type, or ``None`` (no such parameter)."""
    return bool(typed_tensors_in(declared)) or isinstance(get_proper_type(declared), NoneType)


def _bases_declare_untyped(info: TypeInfo, name: str) -> bool:
    """Whether some base declares ``name`` and none declares it with an SPMD type."""
    declared = [base.names[name].node for base in info.mro[1:] if name in base.names]
    types = [node.type for node in declared if isinstance(node, Var) and node.type is not None]
    return bool(types) and not any(typed_tensors_in(t) for t in types)
