"""What a setter's source refers to: functions and module-level names, read across modules, and the classes
of the module configs it is handed.

A name is looked up in the module the code is written in: its own
top-level ``def``s and assignments, else the definition mypy resolved its
import to (``from ...decoder_sharding import set_dense_ffn_sharding``).  A
config's class is a ``Config`` nested in a module class
(``FeedForward.Config``): the setter's parameter's, a field's as its
parent's ``Config`` annotates it (``w2: Linear.Config``), or one an
``isinstance`` test or a callee's annotation narrows it to.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass

from mypy.checker import TypeChecker
from mypy.lookup import lookup_fully_qualified
from mypy.nodes import Decorator, FuncDef, Import, ImportAll, ImportFrom, MypyFile, TypeInfo, Var
from mypy.types import AnyType, CallableType, Instance, NoneType, UnionType, get_proper_type

from spmd_mypy.build_state import state_of
from spmd_mypy.fullnames import MODULE
from spmd_mypy.plans.tree import method, source
from spmd_mypy.sources import SourceFiles, SourceUnreadable


@dataclass(frozen=True)
class Function:
    """A top-level function, with the module it is written in."""

    module: str
    node: ast.FunctionDef


class Program:
    """The sources of the modules a setter reaches, resolved as mypy resolved their names."""

    def __init__(self, api: TypeChecker) -> None:
        self.api = api

    def function(self, module: str, name: str) -> Function | None:
        tree = source(self.api, module)
        defs = [s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == name] if tree else []
        if defs:
            return Function(module, defs[-1])
        node = self._imported(module, name)
        if isinstance(node, Decorator):
            return None  # a wrapped function does what its decorator makes of it
        if isinstance(node, FuncDef) and node.fullname.rpartition(".")[0] != module:
            return self.function(*node.fullname.rpartition(".")[::2])
        return None

    def constant(self, module: str, name: str) -> tuple[str, ast.expr] | None:
        """The expression a module-level name is assigned, with the module it is written in."""
        tree = source(self.api, module)
        for statement in reversed(tree.body if tree else []):
            if isinstance(statement, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                         for t in statement.targets):
                return module, statement.value
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) \
                    and statement.target.id == name and statement.value is not None:
                return module, statement.value
        node = self._imported(module, name)
        if isinstance(node, Var) and node.fullname.rpartition(".")[0] != module:
            return self.constant(*node.fullname.rpartition(".")[::2])
        return None

    def _imported(self, module: str, name: str) -> object:
        tree = self.api.modules.get(module)
        symbol = tree.names.get(name) if tree is not None else None
        return symbol.node if symbol is not None else None

    def class_named(self, module: str, dotted: str) -> TypeInfo | None:
        """The class ``dotted`` (``FusedQKVLinear.Config``) names in ``module``."""
        first, *rest = dotted.split(".")
        node = self._imported(module, first)
        for name in rest:
            if isinstance(node, (TypeInfo, MypyFile)):
                inner = node.names.get(name)
                node = inner.node if inner is not None else None
            else:
                return None
        return node if isinstance(node, TypeInfo) else None

    def annotations(self, function: Function) -> dict[str, TypeInfo]:
        """The parameters annotated with a class (``layer_cfg: "Llama3TransformerBlock.Config"``)."""
        node = self._imported(function.module, function.node.name)
        signature = node.type if isinstance(node, FuncDef) else None
        if not isinstance(signature, CallableType):
            return {}
        found = {}
        for name, typ in zip(signature.arg_names, signature.arg_types):
            proper = get_proper_type(typ)
            if name is not None and isinstance(proper, Instance):
                found[name] = proper.type
        return found

    def module_class(self, config: TypeInfo | None) -> TypeInfo | None:
        """The module class a ``Config`` is nested in (``FeedForward`` for ``FeedForward.Config``)."""
        if config is None or config.name != "Config":
            return None
        symbol = lookup_fully_qualified(config.fullname.rpartition(".")[0], self.api.modules)
        node = symbol.node if symbol is not None else None
        return node if isinstance(node, TypeInfo) and node.has_base(MODULE) else None


def field_class(config: TypeInfo | None, name: str) -> tuple[TypeInfo | None, bool | None]:
    """The class a config's field is annotated with, and whether it may be None (None: not known)."""
    symbol = config.get(name) if config is not None else None
    var = symbol.node if symbol is not None else None
    if not isinstance(var, Var) or var.type is None:
        return None, None
    proper = get_proper_type(var.type)
    items = [get_proper_type(item) for item in proper.items] if isinstance(proper, UnionType) else [proper]
    optional = any(isinstance(item, NoneType) for item in items)
    classes = [item.type for item in items if isinstance(item, Instance)]
    if any(isinstance(item, AnyType) for item in items) or len(classes) != 1:
        return None, optional or None
    return classes[0], optional


_ATTACHED_FIELD = re.compile(r"\.(\w+)\.sharding_config\s*=")


def owner_modules(tree: MypyFile, sources: SourceFiles) -> list[str]:
    """The modules beside one that attaches layouts which build a field it attaches to
    (``config.routed_experts.build()``): mypy analyses them first, so a setter's owner is found whatever
    the order of the build."""
    try:
        fields = {m.group(1) for line in sources.lines(tree) for m in _ATTACHED_FIELD.finditer(line)}
        folder = os.path.dirname(tree.path)
        names = sorted(os.listdir(folder)) if tree.path and fields else []
    except (SourceUnreadable, UnicodeDecodeError, OSError):
        return []
    package = tree.fullname if os.path.basename(tree.path).startswith("__init__.") else tree.fullname.rpartition(".")[0]
    found = []
    for name in names:
        stem, extension = os.path.splitext(name)
        if extension != ".py" or stem == "__init__" or f"{package}.{stem}" == tree.fullname:
            continue
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as file:
                text = file.read()
        except (OSError, UnicodeDecodeError):
            continue
        if any(f"config.{field}.build()" in text for field in fields):
            found.append(f"{package}.{stem}" if package else stem)
    return found


def owners(api: TypeChecker, module: str, fields: set[str]) -> list[TypeInfo]:
    """The module classes whose ``__init__``s build every field (``self.f = config.f.build()``, maybe
    under a condition), in the modules ``module`` imports, directly or not, and those :func:`owner_modules`
    names (mypy has analysed those before it: the answer does not depend on the order of the build)."""
    found = []
    for tree in _imported_modules(api, module):
        for symbol in tree.names.values():
            info = symbol.node
            if isinstance(info, TypeInfo) and info.module_name == tree.fullname and info.has_base(MODULE) \
                    and fields <= set(built(api, info).values()):
                found.append(info)
    return found


def _imported_modules(api: TypeChecker, module: str) -> list[MypyFile]:
    seen: dict[str, MypyFile] = {}
    tree = api.modules.get(module)
    pending = [module, *(owner_modules(tree, state_of(api).sources) if tree is not None else [])]
    while pending:
        tree = api.modules.get(pending.pop())
        if tree is None or tree.fullname in seen:
            continue
        seen[tree.fullname] = tree
        for statement in tree.imports:
            if isinstance(statement, Import):
                pending += [name for name, _ in statement.ids]
            elif isinstance(statement, (ImportFrom, ImportAll)) and not statement.relative:
                pending.append(statement.id)
                pending += [f"{statement.id}.{name}" for name, _ in getattr(statement, "names", ())]
    return list(seen.values())


def built(api: TypeChecker, info: TypeInfo) -> dict[str, str]:
    """Each attribute a module class's ``__init__`` builds from a field of its config
    (``self.wk = config.wkv.build()``: ``{"wk": "wkv"}``)."""
    found: dict[str, str] = {}
    for base in info.mro:
        if base.fullname.startswith("torch.") or "__init__" not in base.names:
            continue
        init = method(api, base, "__init__")
        for statement in ast.walk(init[1]) if init is not None else ():
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target = statement.targets[0]
                fields = {call.func.value.attr for call in ast.walk(statement.value) if isinstance(call, ast.Call)
                          and isinstance(call.func, ast.Attribute) and call.func.attr == "build"
                          and isinstance(call.func.value, ast.Attribute)
                          and ast.unparse(call.func.value.value) == "config"}
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                        and target.value.id == "self" and len(fields) == 1 and target.attr not in found:
                    found[target.attr] = fields.pop()
    return found
