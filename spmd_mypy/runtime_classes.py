"""Sub-modules whose class is decided at run time, declared once in ``[spmd_mypy] modules``.

Real code replaces a model's layers after construction (picotron's
``apply_tensor_parallel`` swaps each ``nn.Linear`` for a
``ColumnParallelLinear``) or builds them from a spec (megatron-core's
``build_module(submodules.linear_fc1, ...)``, torchtitan's
``config.build()``), so mypy reads the attribute as ``nn.Linear`` or ``Any``
and a call of it checks nothing.  An entry ``OWNER.attr: CLASS`` makes every
read of ``attr`` on an ``OWNER`` (a subclass included) an instance of
``CLASS``, whose typed ``forward`` then checks the call (``self.attr`` in
``__init__`` excepted: there it holds what the constructor assigned);
``OWNER.attr[*]: CLASS`` reads an ``nn.ModuleList`` / ``nn.ModuleDict`` /
``nn.Sequential`` as :mod:`spmd_stubs.containers`' container of ``CLASS``
items.  An assignment to the attribute keeps mypy's own type: the code that
builds the model is checked as written.

A declared class the build lacks is an ``spmd-settings`` error at the read,
naming the entry and the fix, and the read keeps mypy's type.  The owner's
module depends on the declared class's module where both are in one source
tree (:func:`additional_deps`), so mypy has analysed the class when the
owner's ``forward`` reads it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mypy.build import PRI_LOW
from mypy.checker import TypeChecker
from mypy.lookup import lookup_fully_qualified
from mypy.messages import format_type
from mypy.nodes import MemberExpr, MypyFile, NameExpr, TypeInfo
from mypy.plugin import AttributeContext
from mypy.types import AnyType, Instance, ProperType, TupleType, Type, TypeVarType, get_proper_type
from mypy.typevars import fill_typevars_with_any

from spmd_mypy import errorcodes
from spmd_mypy.build_state import state_of
from spmd_mypy.config import SECTION, RuntimeClass
from spmd_mypy.statements import defining_module

CONTAINERS_MODULE = "spmd_stubs.containers"
CONTAINERS = (
    ("torch.nn.modules.container.ModuleDict", f"{CONTAINERS_MODULE}.ModuleDictOf"),
    ("torch.nn.modules.container.Sequential", f"{CONTAINERS_MODULE}.SequentialOf"),
    ("torch.nn.modules.container.ModuleList", f"{CONTAINERS_MODULE}.ModuleListOf"),
)
"""torch's container of sub-modules -> the container of declared items the checker reads it as."""


def attribute_hook(attribute: str, declared: Sequence[RuntimeClass]) -> Callable[[AttributeContext], Type] | None:
    """The hook of every read of an attribute named ``attribute``, where an entry declares one; else None."""
    entries = [entry for entry in declared if entry.attribute == attribute]
    if not entries:
        return None

    def hook(ctx: AttributeContext) -> Type:
        if ctx.is_lvalue or _constructing(ctx):
            return ctx.default_attr_type
        receiver = _class_of(get_proper_type(ctx.type))
        entry = _entry_for(receiver, entries) if receiver is not None else None
        if entry is None:
            _report_missing_owners(ctx, entries)
            return ctx.default_attr_type
        found = find_class(_modules(ctx), entry.cls)
        if isinstance(found, Absent):
            _fail(ctx, entry, f"{entry.cls} {found.why}{' the attribute holds at run time' * found.certain}")
            return ctx.default_attr_type
        held = fill_typevars_with_any(found)
        return _container_of(ctx, entry, held) if entry.items else held

    return hook


def declared_entry(receiver: Type, attribute: str, declared: Sequence[RuntimeClass]) -> RuntimeClass | None:
    """The entry that declares what ``attribute`` of a ``receiver`` holds (not its items), if any."""
    owner = _class_of(get_proper_type(receiver))
    entries = [entry for entry in declared if entry.attribute == attribute and not entry.items]
    return _entry_for(owner, entries) if owner is not None and entries else None


def additional_deps(module: MypyFile, declared: Sequence[RuntimeClass]) -> list[tuple[int, str, int]]:
    """The modules ``module`` must be analysed after: the containers of declared items where any are declared,
    and the declared classes' of the owners it defines, where they are in its own source tree.

    A class's module elsewhere (an installed package) is not added: mypy would report a dependency it
    cannot find as a missing import, with no line, where the read's ``spmd-settings`` error says what to do.
    """
    root = _source_root(module)
    needed = {entry.cls.rpartition(".")[0] for entry in declared if entry.owner.startswith(f"{module.fullname}.")}
    needed = {name for name in needed if root is not None and _has_source(root, name)}
    if any(entry.items for entry in declared):
        needed.add(CONTAINERS_MODULE)
    needed.discard(module.fullname)
    return [(PRI_LOW, name, -1) for name in sorted(needed)]


def _source_root(module: MypyFile) -> str | None:
    """The folder ``module``'s top-level package is in (``src`` for ``src/picotron/model.py``)."""
    folder = os.path.dirname(module.path)
    levels = module.fullname.count(".") + (os.path.basename(module.path).startswith("__init__.") and 1)
    for _ in range(levels):
        folder = os.path.dirname(folder)
    return folder if module.path else None


def _has_source(root: str, name: str) -> bool:
    """Whether module ``name`` has a source file (a stub, a package) under ``root``."""
    path = os.path.join(root, *name.split("."))
    return any(os.path.isfile(candidate) for candidate in (
        f"{path}.py", f"{path}.pyi", os.path.join(path, "__init__.py"), os.path.join(path, "__init__.pyi")))


@dataclass(frozen=True)
class Absent:
    """Why a full name finds no class in the build, with the fix: the end of a sentence about the name."""

    why: str
    certain: bool = False
    """The name's module is analysed and has no such class (else it may be out of the build, or not yet read)."""


def find_class(modules: dict[str, MypyFile], fullname: str) -> TypeInfo | Absent:
    """The class ``fullname`` names in the build, or why there is none."""
    found = lookup_fully_qualified(fullname, modules)
    if found is not None and isinstance(found.node, TypeInfo):
        return found.node
    module_name = fullname.rpartition(".")[0]
    module = defining_module(fullname, modules)
    if module is None or (module.names and module.fullname != module_name
                          and fullname.removeprefix(f"{module.fullname}.").partition(".")[0] not in module.names):
        return Absent(f"is not in the build: mypy checks no module {module_name} (neither among its files nor "
                      "their imports); import the class's module where the model is built, or correct the name")
    if not module.names:
        return Absent(f"is not analysed yet where this module reads it: mypy checks {module.fullname} after it; "
                      f"import {module.fullname} in this module")
    return Absent(f"names no class: {module.fullname} has no class {fullname.removeprefix(module.fullname + '.')}; "
                  "write the full name of the class", certain=True)


def _constructing(ctx: AttributeContext) -> bool:
    """A read of ``self.attr`` in ``__init__``: the attribute holds what the constructor assigned (mypy's type)."""
    function = ctx.api.scope.current_function() if isinstance(ctx.api, TypeChecker) else None
    read = ctx.context
    return (function is not None and function.name == "__init__" and bool(function.arguments)
            and isinstance(read, MemberExpr) and isinstance(read.expr, NameExpr)
            and read.expr.name == function.arguments[0].variable.name)


def _class_of(receiver: ProperType) -> TypeInfo | None:
    """The class of the value whose attribute is read (a ``self`` type variable: its bound's)."""
    if isinstance(receiver, TypeVarType):
        receiver = get_proper_type(receiver.upper_bound)
    if isinstance(receiver, TupleType):
        receiver = receiver.partial_fallback
    return receiver.type if isinstance(receiver, Instance) else None


def _entry_for(receiver: TypeInfo, entries: Sequence[RuntimeClass]) -> RuntimeClass | None:
    """The entry of the receiver's nearest class that has one (a subclass's entry wins over its base's)."""
    by_owner = {entry.owner: entry for entry in entries}
    return next((by_owner[base.fullname] for base in receiver.mro if base.fullname in by_owner), None)


def _report_missing_owners(ctx: AttributeContext, entries: Sequence[RuntimeClass]) -> None:
    """An entry whose owner's module is analysed but has no such class: it could never apply."""
    for entry in entries:
        found = find_class(_modules(ctx), entry.owner)
        if isinstance(found, Absent) and found.certain:
            _fail(ctx, entry, f"the owner {entry.owner} {found.why} whose attribute it is")


def _container_of(ctx: AttributeContext, entry: RuntimeClass, item: Instance | TupleType) -> Type:
    """The declared container read as one of :mod:`spmd_stubs.containers`, of ``item``s."""
    container = get_proper_type(ctx.default_attr_type)
    if isinstance(container, AnyType) or not isinstance(item, Instance):
        return ctx.default_attr_type
    torch_class = _class_of(container)
    typed = next((ours for theirs, ours in CONTAINERS if torch_class is not None and torch_class.has_base(theirs)),
                 None)
    if typed is None:
        _fail(ctx, entry, f"[*] declares the items of an nn.ModuleList, nn.ModuleDict or nn.Sequential, but mypy "
                          f"reads the attribute as {format_type(container, ctx.api.options)}; declare the attribute "
                          f"itself ({entry.owner}.{entry.attribute}: CLASS)")
        return ctx.default_attr_type
    found = find_class(_modules(ctx), typed)
    if isinstance(found, Absent):
        _fail(ctx, entry, f"{typed} {found.why}")
        return ctx.default_attr_type
    return Instance(found, [item])


def _modules(ctx: AttributeContext) -> dict[str, MypyFile]:
    """The build's modules by name (a class loaded from mypy's cache included), as mypy handed them the plugin."""
    return state_of(ctx.api).values.modules


def _fail(ctx: AttributeContext, entry: RuntimeClass, problem: str) -> None:
    """An ``spmd-settings`` error at the read: the entry as written, then what is wrong with it and the fix."""
    ctx.api.fail(f"{SECTION} setting modules: {entry.written}: {problem}", ctx.context, code=errorcodes.SETTINGS)
