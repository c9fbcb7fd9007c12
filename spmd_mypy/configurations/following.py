"""Flags followed through a module's assignments: the names and attributes that hold a flag there.

Real layers keep a flag under another name: ``self.mode = config.tp_mode``,
a local ``mode = self.tp_mode``, a parameter ``mode`` that every caller
passes ``self.tp_mode``.  Read before semantic analysis, by the module's
own text, each holds the flag when **every** assignment to it that the
module makes holds that flag (docs/checker.md#configurations has the
rules): every binding of a name in its scope; every ``self.attr = ...`` in
the methods of the classes whose methods may run on one object (bases,
subclasses and theirs), with no ``.attr`` assigned on any other object;
every call of a function whose calls are all seen (``f(...)``,
``self.m(...)``, ``super().m(...)``, ``C(...)`` for ``C``'s own
``__init__``; any other ``x.m`` may be any method ``m``).  Any binding
not followed (an unpacking, a loop's target, ``global``, a walrus, ...)
leaves the name undecided.  "Holds the flag" is the flag's own name
(``tp_mode``, ``config.tp_mode``) or, transitively, something followed.
What the module cannot see (calls from other modules, attributes set
outside it) it assumes away.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Collection, Iterable, Iterator, TypeVar, Union

from mypy.nodes import (
    AssignmentExpr,
    AssignmentStmt,
    CallExpr,
    ClassDef,
    Decorator,
    DelStmt,
    DictionaryComprehension,
    Expression,
    ForStmt,
    FuncDef,
    GeneratorExpr,
    GlobalDecl,
    Import,
    ImportAll,
    ImportFrom,
    LambdaExpr,
    ListExpr,
    MatchStmt,
    MemberExpr,
    MypyFile,
    NameExpr,
    NonlocalDecl,
    OperatorAssignmentStmt,
    OverloadedFuncDef,
    StarExpr,
    Statement,
    SuperExpr,
    TempNode,
    TryStmt,
    TupleExpr,
    WithStmt,
)
from mypy.server.subexpr import get_subexpressions

from spmd_mypy.configurations.syntax import arguments, captures, header, name_of
from spmd_mypy.statements import names_bound_by, nested_blocks

_PLAIN_DECORATORS = frozenset({"staticmethod", "classmethod", "override", "final"})
"""Decorators that keep a function's signature: its calls are still its own."""
_HARMLESS_USES = frozenset({"isinstance", "issubclass", "type"})
"""Calls whose arguments name a class without calling it (its ``__init__``'s calls stay all seen)."""
_Key = TypeVar("_Key")
_ROUNDS = 50
"""At most this many passes to a fixed point (each pass decides at least one more, or is the last)."""


@dataclass(eq=False)
class _Scope:
    """A function's (or the module's) names, each with every binding the module makes of it."""

    node: FuncDef | None
    parent: _Scope | None
    owner: _Class | None = None
    """The class whose body defines this function: it is a method."""
    self_name: str | None = None
    """A method's first parameter (``self``, ``cls``); None for a static method or a function."""
    bindings: dict[str, list[_Source]] = field(default_factory=dict)


@dataclass(eq=False)
class _Class:
    name: str
    bases: list[str]
    body: dict[str, list[_Source]] = field(default_factory=dict)
    """Its body's bindings: class attributes, methods."""
    methods: dict[str, list[FuncDef]] = field(default_factory=dict)
    assigned: dict[str, list[_Source]] = field(default_factory=dict)
    """Each ``self.<attribute> = ...`` in its methods."""
    related: list[_Class] = field(default_factory=list)
    """The classes whose methods may run on one of its objects: itself, its bases, its subclasses and
    theirs (all in the module, by name)."""
    after: list[_Class] = field(default_factory=list)
    """The related classes a ``super()`` in its methods may reach: all but itself and its subclasses."""


@dataclass(frozen=True, eq=False)
class _Assigned:
    """A binding to ``expr``'s value, which is read in ``scope``."""

    expr: Expression
    scope: _Scope


@dataclass(frozen=True, eq=False)
class _Parameter:
    function: FuncDef
    name: str


@dataclass(frozen=True, eq=False)
class _Defined:
    """A ``def`` or ``class`` statement's binding of its name."""

    node: FuncDef | _Class


_Source = Union[_Assigned, _Parameter, _Defined, None]
"""What a binding binds; None: something not followed (an unpacking, a loop's target, an import, ...)."""


@dataclass(eq=False)
class _Target:
    """A function whose calls may decide its parameters."""

    node: FuncDef
    bound: bool
    """Called through an object or class (a method that is not static): its first parameter is bound."""
    plain: bool
    """Defined once in its scope and decorated by nothing that changes its signature."""
    sites: list[tuple[CallExpr, _Scope]] = field(default_factory=list)
    escaped: bool = False
    """Used otherwise than called, or called where its arguments cannot be matched: a call is unseen."""


class Following:
    """The flags that names and attributes hold through one module's assignments (module docstring)."""

    def __init__(self, tree: MypyFile, flags: Collection[str]) -> None:
        self._flags = frozenset(flags)
        self._module = _Scope(None, None)
        self._scopes: dict[FuncDef, _Scope] = {}
        self._classes: list[_Class] = []
        self._targets: dict[FuncDef, _Target] = {}
        self._calls: list[tuple[CallExpr, _Scope]] = []
        self._references: list[tuple[Expression, _Scope]] = []
        self._callees: set[int] = set()
        self._harmless: set[int] = set()
        self._attribute_assignments: list[tuple[MemberExpr, _Source, _Scope]] = []
        self._declared: list[tuple[_Scope, str, bool]] = []  # global (True) or nonlocal (False) names
        self._star_import = False
        self._poisoned: set[str] = set()
        self._names: dict[tuple[_Scope, str], str] = {}
        self._attributes: dict[tuple[_Class, str], str] = {}
        self._scan(tree.defs, self._module, None)
        self._connect()
        self._solve()

    def at(self, function: FuncDef | None) -> Callable[[Expression], str | None]:
        """What an expression written in ``function`` (None: at module level) holds by assignment."""
        scope = self._scopes.get(function, self._module) if function is not None else self._module
        return lambda expr: self._reads(expr, scope)

    # ------------------------------------------------------------------ reading

    def _reads(self, expr: Expression | None, scope: _Scope) -> str | None:
        """The flag ``expr`` holds in ``scope``: by its name, or through what is followed so far."""
        if isinstance(expr, (NameExpr, MemberExpr)) and expr.name in self._flags:
            return expr.name
        if isinstance(expr, NameExpr):
            found = self._resolve(expr.name, scope)
            return self._names.get((found, expr.name)) if found is not None else None
        if isinstance(expr, MemberExpr):
            owner = self._self_class(expr.expr, scope)
            if owner is not None:
                return self._attributes.get((owner, expr.name))
        return None

    def _resolve(self, name: str, scope: _Scope) -> _Scope | None:
        """The scope whose binding ``name`` means here (Python's rule: class bodies are skipped)."""
        current: _Scope | None = scope
        while current is not None:
            if name in current.bindings:
                return current
            current = current.parent
        return None

    def _self_class(self, expr: Expression, scope: _Scope) -> _Class | None:
        """The class of a method's ``self`` (its first parameter, never rebound) that ``expr`` names."""
        if not isinstance(expr, NameExpr):
            return None
        found = self._resolve(expr.name, scope)
        if found is None or found.owner is None or found.self_name != expr.name or found.node is None:
            return None
        only = found.bindings[expr.name]
        if len(only) == 1 and isinstance(only[0], _Parameter) and only[0].function is found.node:
            return found.owner
        return None

    # ------------------------------------------------------------------ scanning

    def _scan(self, statements: list[Statement], scope: _Scope, owner: _Class | None) -> None:
        """Every binding, call and use in ``statements``: a function's or the module's (``owner`` None), or
        a class body's (whose names are its attributes, and invisible to its methods)."""
        names = owner.body if owner is not None else scope.bindings
        for statement in statements:
            if isinstance(statement, OverloadedFuncDef):
                for item in [*statement.items, *([statement.impl] if statement.impl else [])]:
                    self._define(item, scope, owner, overloaded=True)
            elif isinstance(statement, (FuncDef, Decorator)):
                self._define(statement, scope, owner)
            elif isinstance(statement, ClassDef):
                defined = _Class(statement.name, [name_of(base) for base in statement.base_type_exprs])
                self._classes.append(defined)
                _bind(names, statement.name, _Defined(defined))
                self._expressions(statement.decorators, scope, names)
                self._scan(statement.defs.body, scope, defined)
            else:
                self._bindings(statement, scope, names)
                self._expressions(header(statement), scope, names)
                for block in nested_blocks(statement):
                    self._scan(block.body, scope, owner)

    def _define(self, statement: Statement, scope: _Scope, owner: _Class | None, overloaded: bool = False) -> None:
        function, decorators = (statement.func, statement.decorators) if isinstance(statement, Decorator) else (
            statement, [])
        assert isinstance(function, FuncDef)
        names = owner.body if owner is not None else scope.bindings
        _bind(names, function.name, None if overloaded else _Defined(function))
        self._expressions(decorators, scope, names)
        self._expressions([a.initializer for a in function.arguments if a.initializer is not None], scope, names)
        static = function.is_static or any(name_of(d) == "staticmethod" for d in decorators)
        inner = _Scope(function, scope, owner)
        if owner is not None and not static and function.arguments:
            inner.self_name = function.arguments[0].variable.name
        for argument in function.arguments:
            _bind(inner.bindings, argument.variable.name, _Parameter(function, argument.variable.name))
        self._scopes[function] = inner
        if owner is not None:
            owner.methods.setdefault(function.name, []).append(function)
        plain = not overloaded and all(name_of(d) in _PLAIN_DECORATORS for d in decorators)
        self._targets[function] = _Target(function, bound=owner is not None and not static, plain=plain)
        self._scan(function.body.body, inner, None)

    def _bindings(self, statement: Statement, scope: _Scope, names: dict[str, list[_Source]]) -> None:
        """The names and attributes ``statement`` binds, each with what it binds."""
        if isinstance(statement, AssignmentStmt):
            if isinstance(statement.rvalue, TempNode):
                return  # ``x: int``: an annotation binds nothing
            for target in statement.lvalues:
                self._target(target, _Assigned(statement.rvalue, scope), scope, names)
        elif isinstance(statement, OperatorAssignmentStmt):
            self._target(statement.lvalue, None, scope, names)
        elif isinstance(statement, ForStmt):
            self._target(statement.index, None, scope, names)
        elif isinstance(statement, WithStmt):
            for target in statement.target:
                if target is not None:
                    self._target(target, None, scope, names)
        elif isinstance(statement, TryStmt):
            for variable in statement.vars:
                if variable is not None:
                    self._target(variable, None, scope, names)
        elif isinstance(statement, DelStmt):
            self._target(statement.expr, None, scope, names)
        elif isinstance(statement, Import):
            for module, alias in statement.ids:
                _bind(names, alias or module.split(".")[0], None)
        elif isinstance(statement, ImportFrom):
            for name, alias in statement.names:
                _bind(names, alias or name, None)
        elif isinstance(statement, ImportAll):
            self._star_import = True
        elif isinstance(statement, (GlobalDecl, NonlocalDecl)):
            for name in statement.names:
                _bind(names, name, None)
                self._declared.append((scope, name, isinstance(statement, GlobalDecl)))
        elif isinstance(statement, MatchStmt):
            for pattern in statement.patterns:
                for name in captures(pattern):
                    _bind(names, name, None)

    def _target(self, target: Expression, source: _Source, scope: _Scope, names: dict[str, list[_Source]]) -> None:
        """``target`` bound to ``source``: kept for a plain name or attribute, unfollowed inside an unpacking."""
        if isinstance(target, NameExpr):
            _bind(names, target.name, source)
        elif isinstance(target, MemberExpr):
            self._attribute_assignments.append((target, source, scope))
        elif isinstance(target, (TupleExpr, ListExpr)):
            for item in target.items:
                self._target(item, None, scope, names)
        elif isinstance(target, StarExpr):
            self._target(target.expr, None, scope, names)

    def _expressions(self, expressions: Iterable[Expression], scope: _Scope, names: dict[str, list[_Source]]) -> None:
        """The calls and uses in ``expressions``, and the names they bind (walrus, comprehension, lambda)."""
        for expression in expressions:
            for sub in get_subexpressions(expression):
                if isinstance(sub, CallExpr):
                    self._calls.append((sub, scope))
                    self._callees.add(id(sub.callee))
                    if isinstance(sub.callee, NameExpr) and sub.callee.name in _HARMLESS_USES:
                        self._harmless.update(id(argument) for argument in sub.args)
                elif isinstance(sub, (NameExpr, MemberExpr, SuperExpr)):
                    self._references.append((sub, scope))
                elif isinstance(sub, AssignmentExpr):
                    _bind(names, sub.target.name, None)
                elif isinstance(sub, LambdaExpr):
                    for argument in sub.arguments:
                        _bind(names, argument.variable.name, None)
                elif isinstance(sub, (GeneratorExpr, DictionaryComprehension)):
                    for index in sub.indices:
                        for name in names_bound_by(index):
                            _bind(names, name, None)

    # ------------------------------------------------------------------ connecting

    def _connect(self) -> None:
        """The classes' relations, the sources of their attributes, every target's calls."""
        for scope, name, is_global in self._declared:
            outer: list[_Scope] = [self._module] if is_global else list(_enclosing_functions(scope))
            for declared_in in outer:
                if is_global or name in declared_in.bindings:
                    _bind(declared_in.bindings, name, None)
        if self._star_import:
            for name in list(self._module.bindings):
                _bind(self._module.bindings, name, None)
        self._relate()
        for target, source, scope in self._attribute_assignments:
            owner = self._self_class(target.expr, scope)
            if owner is None:
                self._poisoned.add(target.name)
            else:
                owner.assigned.setdefault(target.name, []).append(source)
        for call, scope in self._calls:
            self._call(call, scope)
        for reference, scope in self._references:
            if id(reference) not in self._callees and id(reference) not in self._harmless:
                self._used(reference, scope)

    def _relate(self) -> None:
        """Each class's related classes (:attr:`_Class.related`), and those a ``super()`` reaches."""
        by_name: dict[str, list[_Class]] = {}
        for defined in self._classes:
            by_name.setdefault(defined.name, []).append(defined)
        ancestors: dict[int, list[_Class]] = {}

        def ancestors_of(defined: _Class) -> list[_Class]:
            if id(defined) not in ancestors:
                ancestors[id(defined)] = []  # a cycle of names ends here
                found: dict[int, _Class] = {}
                for base in defined.bases:
                    for parent in by_name.get(base, []):
                        found.update({id(c): c for c in [parent, *ancestors_of(parent)]})
                ancestors[id(defined)] = list(found.values())
            return ancestors[id(defined)]

        for defined in self._classes:
            below = [c for c in self._classes if any(a is defined for a in ancestors_of(c))]
            related = {id(c): c for c in [*by_name[defined.name], *ancestors_of(defined)]}
            for subclass in below:
                related.update({id(c): c for c in [subclass, *ancestors_of(subclass)]})
            defined.related = list(related.values())
            later = {id(c) for c in below} | {id(defined)}
            defined.after = [c for c in defined.related if id(c) not in later]

    def _call(self, call: CallExpr, scope: _Scope) -> None:
        callee = call.callee
        if isinstance(callee, NameExpr):
            found = self._resolve(callee.name, scope)
            only = found.bindings[callee.name] if found is not None else []
            if len(only) != 1 or not isinstance(only[0], _Defined):
                return
            defined = only[0].node
            if isinstance(defined, FuncDef):
                self._site(defined, call, scope)
            else:
                initialisers = defined.methods.get("__init__", [])
                if len(initialisers) == 1:
                    self._site(initialisers[0], call, scope)
                else:  # inherited, or defined twice: which one runs is not seen here
                    self._escape_methods("__init__", defined.related)
        elif isinstance(callee, MemberExpr):
            owner = self._self_class(callee.expr, scope)
            if owner is not None:
                for method in _methods(callee.name, owner.related):
                    self._site(method, call, scope)
            else:
                self._escape_methods(callee.name)
        elif isinstance(callee, SuperExpr):
            owner = next((s.owner for s in _chain(scope) if s.owner is not None), None)
            if owner is not None:
                for method in _methods(callee.name, owner.after):
                    self._site(method, call, scope)
            else:
                self._escape_methods(callee.name)

    def _used(self, reference: Expression, scope: _Scope) -> None:
        """A function or class named otherwise than in a call: its calls are not all seen."""
        if isinstance(reference, NameExpr):
            found = self._resolve(reference.name, scope)
            for source in found.bindings[reference.name] if found is not None else []:
                if isinstance(source, _Defined):
                    if isinstance(source.node, FuncDef):
                        self._targets[source.node].escaped = True
                    else:
                        self._escape_methods("__init__", source.node.related)
        elif isinstance(reference, (MemberExpr, SuperExpr)):
            self._escape_methods(reference.name)

    def _site(self, function: FuncDef, call: CallExpr, scope: _Scope) -> None:
        self._targets[function].sites.append((call, scope))

    def _escape_methods(self, name: str, classes: list[_Class] | None = None) -> None:
        for method in _methods(name, self._classes if classes is None else classes):
            self._targets[method].escaped = True

    # ------------------------------------------------------------------ solving

    def _solve(self) -> None:
        """Each name and attribute's flag: the least fixed point, from nothing followed (so a cycle of
        assignments decides nothing it does not read from a flag).  Only those every source of which could
        hold a flag take part: a name or attribute read, or a parameter whose calls are all seen."""
        names = [(scope, name) for scope in [self._module, *self._scopes.values()]
                 for name, sources in scope.bindings.items()
                 if name not in self._flags and all(map(self._may_hold, sources))
                 and not (scope is self._module and self._star_import)]
        attributes = []
        for defined in self._classes:
            sources: dict[str, list[_Source]] = {}
            for related in defined.related:
                for name, assigned in [*related.assigned.items(), *related.body.items()]:
                    sources.setdefault(name, []).extend(assigned)
            attributes += [(defined, name, assigned) for name, assigned in sources.items()
                           if name not in self._flags and name not in self._poisoned
                           and all(isinstance(s, _Assigned) and self._may_hold(s) for s in assigned)]
        for _ in range(_ROUNDS):
            changed = False
            for scope, name in names:
                changed |= _update(self._names, (scope, name), self._agreed(scope.bindings[name]))
            for defined, name, assigned in attributes:
                changed |= _update(self._attributes, (defined, name), self._agreed(assigned))
            if not changed:
                return

    def _may_hold(self, source: _Source) -> bool:
        if isinstance(source, _Assigned):
            return isinstance(source.expr, (NameExpr, MemberExpr))
        if isinstance(source, _Parameter):
            target = self._targets.get(source.function)
            return target is not None and target.plain and not target.escaped and bool(target.sites)
        return False

    def _agreed(self, sources: list[_Source]) -> str | None:
        """The flag every source holds, if they all hold the same one."""
        flags = {self._holds(source) for source in sources}
        return flags.pop() if len(flags) == 1 and None not in flags else None

    def _holds(self, source: _Source) -> str | None:
        if isinstance(source, _Assigned):
            return self._reads(source.expr, source.scope)
        if isinstance(source, _Parameter):
            return self._parameter(source)
        return None

    def _parameter(self, parameter: _Parameter) -> str | None:
        """The flag every call of the function passes the parameter, where every call is seen."""
        target = self._targets.get(parameter.function)
        if target is None or not target.plain or target.escaped or not target.sites:
            return None
        flags = set()
        for call, scope in target.sites:
            passed = arguments(call, target.node, target.bound)
            argument = passed.get(parameter.name) if passed is not None else None
            flags.add(self._reads(argument, scope) if argument is not None else None)
        return flags.pop() if len(flags) == 1 and None not in flags else None


def _methods(name: str, classes: list[_Class]) -> Iterator[FuncDef]:
    for defined in classes:
        yield from defined.methods.get(name, [])


def _update(known: dict[_Key, str], key: _Key, value: str | None) -> bool:
    if known.get(key) == value:
        return False
    if value is None:
        del known[key]
    else:
        known[key] = value
    return True


def _bind(names: dict[str, list[_Source]], name: str, source: _Source) -> None:
    names.setdefault(name, []).append(source)


def _chain(scope: _Scope) -> Iterator[_Scope]:
    current: _Scope | None = scope
    while current is not None:
        yield current
        current = current.parent


def _enclosing_functions(scope: _Scope) -> Iterator[_Scope]:
    """``scope`` and the functions around it (a ``nonlocal`` name is one of theirs)."""
    return (s for s in _chain(scope) if s.node is not None)
