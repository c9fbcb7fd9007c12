"""The sub-modules a plan's keys name, and the source of each module class's ``forward``.

A module's children are its attributes whose declared or inferred type is
an ``nn.Module`` subclass (mypy's view of ``__init__``).  An
``nn.ModuleList``/``nn.ModuleDict`` has one child, ``*``, standing for
every item: its class is the one ``__init__`` builds the items of
(``nn.ModuleList([Block(args) for _ in ...])``, ``self.layers[str(i)] =
Block(args)``), read from the class's source.  mypy keeps no function
bodies of modules it loads from its cache, so bodies are read from the
source files with :mod:`ast`, each parsed once per file version.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from mypy.checker import TypeChecker
from mypy.nodes import MypyFile, TypeInfo, Var
from mypy.types import Instance, get_proper_type

from spmd_mypy.build_state import state_of
from spmd_mypy.fullnames import EMBEDDING, LINEAR, MODULE, MODULE_CONTAINERS

_DEPTH = 8
"""How deep the tree is followed (a class holding a module of its own class stops here)."""


@dataclass
class Node:
    """A sub-module: its dotted path from the planned module and its class (None: not known)."""

    path: str
    info: TypeInfo | None
    children: dict[str, Node] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """What the styles see: ``linear``, ``embedding`` (torch's Colwise/RowwiseParallel take those),
        ``composite`` (a module holding sub-modules) or ``other``."""
        if self.info is not None and self.info.has_base(LINEAR):
            return "linear"
        if self.info is not None and self.info.has_base(EMBEDDING):
            return "embedding"
        return "composite" if self.children else "other"

    def walk(self) -> list[Node]:
        return [self, *(node for child in self.children.values() for node in child.walk())]


def build(api: TypeChecker, info: TypeInfo) -> Node:
    return _node(api, "", info, _DEPTH)


def _node(api: TypeChecker, path: str, info: TypeInfo | None, depth: int) -> Node:
    node = Node(path, info)
    if info is None or depth == 0:
        return node
    for base in info.mro:
        if base.fullname.startswith("torch."):
            continue
        for name, symbol in base.names.items():
            child = get_proper_type(symbol.node.type) if isinstance(symbol.node, Var) and symbol.node.type else None
            if name in node.children or not (isinstance(child, Instance) and child.type.has_base(MODULE)):
                continue
            where = f"{path}.{name}" if path else name
            if child.type.fullname in MODULE_CONTAINERS:
                item = _node(api, f"{where}.*", container_item(api, base, name), depth - 1)
                node.children[name] = Node(where, child.type, {"*": item})
            else:
                node.children[name] = _node(api, where, child.type, depth - 1)
    return node


def matches(root: Node, key: str) -> list[Node]:
    """The nodes ``key`` names: dotted atoms, each a name or an ``fnmatch`` pattern (as torch reads them);
    any atom names a container's items."""
    nodes = [root]
    for atom in key.split("."):
        nodes = [child for node in nodes for name, child in node.children.items()
                 if name == "*" or fnmatchcase(name, atom)]
    return nodes


def source(api: TypeChecker, module: str) -> ast.Module | None:
    """The parsed source of ``module`` (None where it cannot be read), parsed once per file version."""
    tree = api.modules.get(module)
    path = tree.path if tree is not None else None
    if not path or not path.endswith(".py"):
        return None
    cache = state_of(api).plan_sources
    try:
        stamp = os.stat(path).st_mtime_ns
        if path not in cache or cache[path][0] != stamp:
            with open(path, encoding="utf-8") as file:
                cache[path] = (stamp, ast.parse(file.read(), path))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    return cache[path][1]


def torch_names(api: TypeChecker, module: str) -> frozenset[str]:
    """The names ``module`` binds to torch's modules and members (``torch``, ``F``, ``nn``): a call through
    one is a torch function, looked up by its name."""
    tree = source(api, module)
    names: set[str] = set()
    for statement in tree.body if tree is not None else ():
        if isinstance(statement, ast.Import):
            names |= {a.asname or a.name.split(".")[0] for a in statement.names if a.name.split(".")[0] == "torch"}
        elif isinstance(statement, ast.ImportFrom) and (statement.module or "").split(".")[0] == "torch":
            names |= {a.asname or a.name for a in statement.names}
    return frozenset(names)


def class_def(api: TypeChecker, info: TypeInfo) -> ast.ClassDef | None:
    tree = source(api, info.module_name)
    found = [s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == info.name] if tree else []
    return found[0] if len(found) == 1 else None


def method(api: TypeChecker, info: TypeInfo, name: str) -> tuple[TypeInfo, ast.FunctionDef] | None:
    """The first definition of ``name`` in ``info``'s MRO outside torch, with the class defining it."""
    for base in info.mro:
        if base.fullname.startswith("torch.") or name not in base.names:
            continue
        cls = class_def(api, base)
        defs = [s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == name] if cls else []
        return (base, defs[-1]) if defs else None
    return None


def container_item(api: TypeChecker, owner: TypeInfo, attribute: str) -> TypeInfo | None:
    """The one class ``owner.__init__`` builds the items of its container ``attribute`` from."""
    found = method(api, owner, "__init__")
    if found is None:
        return None
    built: set[str] = set()
    for statement in ast.walk(found[1]):
        if not isinstance(statement, ast.Assign):
            continue
        for target in statement.targets:
            if _is_self_attribute(target, attribute):
                built |= _item_calls(statement.value)
            elif isinstance(target, ast.Subscript) and _is_self_attribute(target.value, attribute):
                built |= _callee_names(statement.value)
    module = api.modules.get(owner.module_name)
    classes = {_resolve(api, module, name) for name in built} if module is not None else {None}
    return classes.pop() if len(classes) == 1 else None


def _is_self_attribute(node: ast.expr, attribute: str) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == attribute and isinstance(node.value, ast.Name)
            and node.value.id == "self")


def _item_calls(value: ast.expr) -> set[str]:
    """The classes a ``ModuleList(...)``/``ModuleDict(...)`` call's argument builds its items with."""
    if not (isinstance(value, ast.Call) and len(value.args) == 1):
        return set()
    items = value.args[0]
    if isinstance(items, (ast.ListComp, ast.GeneratorExp)):
        return _callee_names(items.elt)
    if isinstance(items, ast.DictComp):
        return _callee_names(items.value)
    if isinstance(items, (ast.List, ast.Tuple)):
        return {name for item in items.elts for name in _callee_names(item)}
    if isinstance(items, ast.Dict):
        return {name for item in items.values for name in _callee_names(item)}
    return {"<unknown>"}


def _callee_names(value: ast.expr) -> set[str]:
    return {ast.unparse(value.func)} if isinstance(value, ast.Call) else {"<unknown>"}


def _resolve(api: TypeChecker, module: MypyFile, dotted: str) -> TypeInfo | None:
    """``Block`` or ``blocks.Block`` as ``module``'s names see it."""
    first, *rest = dotted.split(".")
    symbol = module.names.get(first)
    node = symbol.node if symbol is not None else None
    for name in rest:
        if not isinstance(node, MypyFile):
            return None
        symbol = node.names.get(name)
        node = symbol.node if symbol is not None else None
    return node if isinstance(node, TypeInfo) else None


def construction(api: TypeChecker, owner: TypeInfo, attribute: str) -> ast.Call | None:
    """The call ``self.<attribute> = Module(...)`` builds the sub-module with, in the first ``__init__`` of
    ``owner``'s MRO outside torch that assigns it (None: built otherwise, or more than once)."""
    for base in owner.mro:
        if base.fullname.startswith("torch.") or "__init__" not in base.names:
            continue
        found = method(api, base, "__init__")
        calls = [s.value for s in ast.walk(found[1]) if isinstance(s, ast.Assign)
                 and any(_is_self_attribute(t, attribute) for t in s.targets)] if found is not None else []
        if calls:
            return calls[0] if len(calls) == 1 and isinstance(calls[0], ast.Call) else None
    return None
