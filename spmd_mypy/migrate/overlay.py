"""SPMD annotations declared outside a module's source, applied to a copy of it.

For third-party code nobody here maintains (fairscale, megatron-core): an
overlay file names functions, parameters and attributes and gives their
SPMD types; :class:`OverlayCommand` writes them into the module as
annotations, spelled the way the module spells its own (:mod:`.spelling`),
so the plugin checks the copy.  The format (TOML)::

    [modules."fairscale.nn.model_parallel.layers".functions]
    "ColumnParallelLinear.forward" = { input_ = "I@tp", return = ["I@tp", "S(-1)@tp"] }

    [modules."fairscale.nn.model_parallel.layers".attributes]
    "ColumnParallelLinear.weight" = "S(0)@tp"

A type is ``"R@tp, V@dp"`` (validated by the type algebra's parser); a list
is a union, and may contain ``"None"`` (an optional parameter such as a
bias).  A type chosen by a run-time flag is
``{ if = "sequence_parallel", then = "S(0)@tp", else = "I@tp" }``: the copy
gets a module-level alias chosen by ``spmd_stubs.flags.sequence_parallel``,
one type in each configuration the checker runs (docs/checker.md#configurations).  A result that
is a fixed tuple (an autograd Function's ``backward``, one gradient per
input of ``forward``; megatron's layers' ``(output, bias)``) is ``return = {
tuple = ["I@tp", "None"] }``: each item a type, a type a flag chooses, or
``"None"`` alone.  An entry that matches nothing is an error: the
overlay went stale against the code.

Overlays for fairscale and megatron-core ship in the package
(``spmd_mypy/overlays/``), named by :func:`shipped_overlays`:
``spmd-migrate --overlay megatron-core`` reads the shipped file.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import libcst as cst
import libcst.helpers
from libcst.codemod import CodemodContext, VisitorBasedCodemodCommand
from libcst.codemod.visitors import AddImportsVisitor

from spmd_mypy.migrate.spelling import Spelling, imports_of, spelled, spelling_of
from spmd_stubs import core

__all__ = [
    "OverlayError", "SpmdType", "SpmdTuple", "AliasName", "ModuleOverlay", "load_overlays", "shipped_overlays",
    "overlay_file", "OverlayCommand", "add_imports", "apply_overlay", "overlaid",
]

SHIPPED = Path(__file__).resolve().parents[1] / "overlays"
"""The overlays that ship in the package, one TOML file per library."""


class OverlayError(ValueError):
    """A malformed overlay file, or an entry that matches nothing in the module."""


@dataclass(frozen=True)
class SpmdType:
    """A tensor type, or a union of them (possibly with None), as written in an overlay."""

    alternatives: tuple[core.TensorType, ...]
    optional: bool = False

    @classmethod
    def parse(cls, value: Any, where: str) -> "SpmdType":
        texts = value if isinstance(value, list) else [value]
        if not texts or not all(isinstance(text, str) for text in texts):
            raise OverlayError(f"{where}: a type is a string like \"R@tp\" or a list of them")
        tensors = [text for text in texts if text != "None"]
        if not tensors:
            raise OverlayError(f"{where}: a type needs at least one tensor type besides None")
        try:
            alternatives = tuple(core.TensorType.parse(text) for text in tensors)
        except ValueError as err:
            raise OverlayError(f"{where}: {err}") from err
        return cls(alternatives, optional=len(tensors) < len(texts))

    def annotation(self, spelling: Spelling = Spelling.AT) -> str:
        """``Tensor[R@tp, V@dp]`` (or ``Tensor[R[tp], V[dp]]``...: ``spelling``), ``|``-joined for a union."""
        parts = [spelled(t, spelling) for t in self.alternatives] + (["None"] if self.optional else [])
        return " | ".join(parts)

    def imports(self, spelling: Spelling = Spelling.AT) -> set[tuple[str, str]]:
        """The ``(module, name)`` pairs the annotation uses."""
        return {needed for tensor_type in self.alternatives for needed in imports_of(tensor_type, spelling)}


@dataclass(frozen=True)
class SpmdTuple:
    """A fixed tuple result: each item a tensor type (or union), a type a flag chooses, or None."""

    items: tuple["SpmdType | SpmdChoice | None", ...]

    @classmethod
    def parse(cls, value: Any, where: str) -> "SpmdTuple":
        if set(value) != {"tuple"} or not isinstance(value["tuple"], list) or not value["tuple"]:
            raise OverlayError(f"{where}: a tuple result is written {{ tuple = [\"I@tp\", \"None\"] }}")
        return cls(tuple(
            None if item == "None" else _parse_type(item, f"{where}[{index}]")
            for index, item in enumerate(value["tuple"])
        ))

    def choices(self) -> list["SpmdChoice"]:
        """The items a flag chooses: each needs its module-level alias."""
        return [item for item in self.items if isinstance(item, SpmdChoice)]

    def annotation(self, spelling: Spelling = Spelling.AT) -> str:
        """``tuple[Tensor[I@tp], None]``."""
        return "tuple[" + ", ".join("None" if t is None else t.annotation(spelling) for t in self.items) + "]"

    def imports(self, spelling: Spelling = Spelling.AT) -> set[tuple[str, str]]:
        return {needed for item in self.items if item is not None for needed in item.imports(spelling)}


@dataclass(frozen=True)
class SpmdChoice:
    """A type chosen by a flag: ``then`` where the configuration sets it, ``otherwise`` where it does not."""

    flag: str
    then: SpmdType
    otherwise: SpmdType

    @classmethod
    def parse(cls, value: Any, where: str) -> "SpmdChoice":
        if set(value) != {"if", "then", "else"} or not str(value["if"]).isidentifier():
            raise OverlayError(f"{where}: a type chosen by a flag is written "
                               "{ if = \"sequence_parallel\", then = \"S(0)@tp\", else = \"I@tp\" }")
        return cls(value["if"], SpmdType.parse(value["then"], f"{where}.then"),
                   SpmdType.parse(value["else"], f"{where}.else"))

    def annotation(self, spelling: Spelling = Spelling.AT) -> str:
        """The alias's name, from what it chooses: ``_spmd_sequence_parallel_S_0_tp_I_tp`` (in every spelling)."""
        return "_".join(["_spmd", self.flag, _identifier(self.then), _identifier(self.otherwise)])

    def alias(self, spelling: Spelling = Spelling.AT) -> str:
        """``<name> = Tensor[S[0, tp]] if spmd_stubs.flags.<flag> else Tensor[I[tp]]`` (in a module written
        in ``spelling``; an alias is an expression, where the ``@`` form is not read)."""
        written = spelling.in_expression()
        return (f"{self.annotation()} = {self.then.annotation(written)} if spmd_stubs.flags.{self.flag} "
                f"else {self.otherwise.annotation(written)}")

    def imports(self, spelling: Spelling = Spelling.AT) -> set[tuple[str, str]]:
        written = spelling.in_expression()
        return self.then.imports(written) | self.otherwise.imports(written)


@dataclass(frozen=True)
class AliasName:
    """A type alias the module already has in scope, written by its name (``Activation``, or
    ``Activation | None``): a flag-chosen alias is one type per configuration, which no single
    ``Tensor[...]`` is.  ``choice`` is the same as an overlay entry, where one boolean flag picks it."""

    name: str
    optional: bool = False
    choice: SpmdChoice | None = None

    def annotation(self, spelling: Spelling = Spelling.AT) -> str:
        return f"{self.name} | None" if self.optional else self.name

    def imports(self, spelling: Spelling = Spelling.AT) -> set[tuple[str, str]]:
        return set()  # in scope already


def _identifier(spmd_type: SpmdType) -> str:
    """``S(-1)@tp`` -> ``S_m1_tp``."""
    return re.sub(r"\W+", "_", spmd_type.annotation().replace("Tensor", "").replace("-", "m")).strip("_")


def _parse_type(value: Any, where: str) -> "SpmdType | SpmdChoice":
    return SpmdChoice.parse(value, where) if isinstance(value, dict) else SpmdType.parse(value, where)


def _parse_entry(name: str, value: Any, where: str) -> "SpmdType | SpmdTuple | SpmdChoice":
    if name == "return" and isinstance(value, dict) and "if" not in value:
        return SpmdTuple.parse(value, where)
    return _parse_type(value, where)


@dataclass
class ModuleOverlay:
    """The entries for one module: ``functions[path][param or "return"]``, ``attributes[path]``."""

    functions: dict[str, dict[str, SpmdType | SpmdTuple | SpmdChoice | AliasName]] = field(default_factory=dict)
    attributes: dict[str, SpmdType | SpmdChoice | AliasName] = field(default_factory=dict)

    def merge(self, other: "ModuleOverlay") -> None:
        self.functions.update(other.functions)
        self.attributes.update(other.attributes)


def _module_overlay(module: str, spec: Any) -> ModuleOverlay:
    if not isinstance(spec, dict) or set(spec) - {"functions", "attributes"}:
        raise OverlayError(f"modules.{module}: expected only [functions] and [attributes] tables")
    overlay = ModuleOverlay()
    for path, params in spec.get("functions", {}).items():
        if not isinstance(params, dict):
            raise OverlayError(f"{module}.{path}: a function entry is a table of parameter = type")
        overlay.functions[path] = {
            name: _parse_entry(name, value, f"{module}.{path}({name})") for name, value in params.items()
        }
    for path, value in spec.get("attributes", {}).items():
        if "." not in path:
            raise OverlayError(f"{module}.{path}: an attribute is written Class.attribute")
        overlay.attributes[path] = _parse_type(value, f"{module}.{path}")
    return overlay


def shipped_overlays() -> dict[str, Path]:
    """The shipped overlays by name: the file's stem, ``-`` for ``_`` (``megatron-core``)."""
    return {path.stem.replace("_", "-"): path for path in sorted(SHIPPED.glob("*.toml"))}


def overlay_file(given: Path) -> Path:
    """An overlay file, or a shipped overlay's name (``fairscale``, ``megatron-core`` or ``megatron_core``).

    An existing file wins over a shipped name; anything else must be a file.
    """
    shipped = shipped_overlays()
    name = str(given).replace("_", "-")
    if name in shipped and not given.is_file():
        return shipped[name]
    if not given.is_file():
        raise OverlayError(f"{given}: no such overlay file, nor a shipped overlay ({', '.join(shipped)})")
    return given


def load_overlays(paths: Sequence[Path]) -> dict[str, ModuleOverlay]:
    """Read overlay files (or shipped overlays by name); later files add to (and override) earlier ones."""
    merged: dict[str, ModuleOverlay] = {}
    for path in map(overlay_file, paths):
        with open(path, "rb") as handle:
            try:
                data = tomllib.load(handle)
            except tomllib.TOMLDecodeError as err:
                raise OverlayError(f"{path}: {err}") from err
        if set(data) - {"modules"}:
            raise OverlayError(f"{path}: expected only [modules.\"<module>\"...] tables")
        for module, spec in data.get("modules", {}).items():
            merged.setdefault(module, ModuleOverlay()).merge(_module_overlay(module, spec))
    return merged


Declared = SpmdType | SpmdTuple | SpmdChoice | AliasName


def _annotation(spmd_type: Declared, spelling: Spelling) -> cst.Annotation:
    return cst.Annotation(cst.parse_expression(spmd_type.annotation(spelling)))


def add_imports(context: CodemodContext, spmd_type: Declared, spelling: Spelling, qualified: bool = False) -> None:
    """Have the codemod of ``context`` import what ``spmd_type`` spelled in ``spelling`` uses; ``spmd_stubs``
    itself instead of its ``Tensor`` where the module's ``Tensor`` is another (:class:`_QualifiedTensor`)."""
    for module, name in sorted(spmd_type.imports(spelling)):
        if qualified and (module, name) == ("spmd_stubs", "Tensor"):
            AddImportsVisitor.add_needed_import(context, "spmd_stubs")
        else:
            AddImportsVisitor.add_needed_import(context, module, name)


def _binds_other_tensor(module: cst.Module) -> bool:
    """Whether the module imports a ``Tensor`` of its own (``from torch import Tensor``)."""
    for statement in module.body:
        for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
            if not isinstance(small, cst.ImportFrom) or isinstance(small.names, cst.ImportStar):
                continue
            source = cst.helpers.get_full_name_for_node(small.module) if small.module is not None else None
            bound = {(alias.asname.name.value if alias.asname else alias.name.value)  # type: ignore[union-attr]
                     for alias in small.names}
            if "Tensor" in bound and source != "spmd_stubs":
                return True
    return False


class _QualifiedTensor(cst.CSTTransformer):
    """``Tensor[...]`` -> ``spmd_stubs.Tensor[...]``: in a module whose own ``Tensor`` is torch's, the SPMD
    annotations name spmd_stubs' (torch's ``Tensor`` takes no subscript, so every subscripted one is ours)."""

    def leave_Subscript(self, original_node: cst.Subscript, updated_node: cst.Subscript) -> cst.Subscript:
        if isinstance(updated_node.value, cst.Name) and updated_node.value.value == "Tensor":
            return updated_node.with_changes(value=cst.Attribute(cst.Name("spmd_stubs"), cst.Name("Tensor")))
        return updated_node


class OverlayCommand(VisitorBasedCodemodCommand):
    """Write one module's overlay entries into it as annotations, spelled as the module spells its own."""

    DESCRIPTION = "Apply SPMD annotations declared in an overlay file."

    def __init__(self, context: CodemodContext, overlay: ModuleOverlay) -> None:
        super().__init__(context)
        self.overlay = overlay
        self.unmatched = {*overlay.functions, *overlay.attributes}
        self.spelling = Spelling.AT
        self._path: list[str] = []
        self._choices: dict[str, SpmdChoice] = {}
        self._qualified = False

    def _use(self, spmd_type: Declared) -> None:
        chosen = [spmd_type] if isinstance(spmd_type, SpmdChoice) else \
            spmd_type.choices() if isinstance(spmd_type, SpmdTuple) else []
        for choice in chosen:
            self._choices[choice.annotation()] = choice
            AddImportsVisitor.add_needed_import(self.context, "spmd_stubs")
        add_imports(self.context, spmd_type, self.spelling, self._qualified)

    def visit_Module(self, node: cst.Module) -> None:
        self.spelling = spelling_of(node)
        self._qualified = _binds_other_tensor(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._path.append(node.name.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._path.append(node.name.value)

    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.FunctionDef:
        path = ".".join(self._path)
        self._path.pop()
        entry = self.overlay.functions.get(path)
        if entry is None:
            return updated_node
        self.unmatched.discard(path)
        params = {p.name.value for p in _all_params(updated_node.params)}
        missing = set(entry) - params - {"return"}
        if missing:
            raise OverlayError(f"{self.context.full_module_name}.{path} has no parameter {sorted(missing)}")
        for spmd_type in entry.values():
            self._use(spmd_type)
        return updated_node.with_changes(
            params=_annotate_params(updated_node.params, entry, self.spelling),
            returns=_annotation(entry["return"], self.spelling) if "return" in entry else updated_node.returns,
        )

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        """The flag-chosen aliases, before the module's first class or function (after its imports); every
        annotation qualified where the module's own ``Tensor`` is another."""
        body = list(updated_node.body)
        at = next((i for i, s in enumerate(body) if isinstance(s, (cst.ClassDef, cst.FunctionDef))), len(body))
        aliases = [cst.parse_statement(choice.alias(self.spelling)) for _, choice in sorted(self._choices.items())]
        written = updated_node.with_changes(body=[*body[:at], *aliases, *body[at:]])
        return written.visit(_QualifiedTensor()) if self._qualified else written

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        path = ".".join(self._path)
        self._path.pop()
        prefix = path + "."
        declared = {
            key[len(prefix):]: value
            for key, value in self.overlay.attributes.items()
            if key.startswith(prefix) and "." not in key[len(prefix):]
        }
        if not declared:
            return updated_node
        for name, spmd_type in declared.items():
            self.unmatched.discard(prefix + name)
            self._use(spmd_type)
        return updated_node.with_changes(body=_declare_attributes(updated_node.body, declared, self.spelling))


def _all_params(params: cst.Parameters) -> list[cst.Param]:
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    return every + [p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]


def _annotate_params(params: cst.Parameters, entry: dict[str, Declared], spelling: Spelling) -> cst.Parameters:
    def annotate(param: cst.Param) -> cst.Param:
        spmd_type = entry.get(param.name.value)
        if spmd_type is None:
            return param
        annotated = param.with_changes(annotation=_annotation(spmd_type, spelling))
        if param.default is not None and param.annotation is None:  # PEP 8: ``x: T = None``, ``x=None``
            annotated = annotated.with_changes(equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(" "), whitespace_after=cst.SimpleWhitespace(" ")))
        return annotated

    return params.with_changes(
        posonly_params=[annotate(p) for p in params.posonly_params],
        params=[annotate(p) for p in params.params],
        kwonly_params=[annotate(p) for p in params.kwonly_params],
    )


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _declared_name(statement: cst.BaseStatement) -> str | None:
    """The attribute a class-level ``name: T`` statement declares."""
    if isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.AnnAssign):
        target = statement.body[0].target
        return target.value if isinstance(target, cst.Name) else None
    return None


def _declare_attributes(body: cst.BaseSuite, declared: dict[str, SpmdType | SpmdChoice | AliasName],
                        spelling: Spelling) -> cst.BaseSuite:
    """Class-level ``name: Tensor[...]`` declarations, after the docstring; existing ones re-annotated."""
    if not isinstance(body, cst.IndentedBlock):
        raise OverlayError("a class written on one line cannot take attribute declarations")
    statements: list[cst.BaseStatement] = list(body.body)
    existing = {_declared_name(s): i for i, s in enumerate(statements) if _declared_name(s)}
    new = []
    for name, spmd_type in declared.items():
        if name in existing:
            index = existing[name]
            line = statements[index]
            assert isinstance(line, cst.SimpleStatementLine)  # _declared_name found an AnnAssign there
            statements[index] = line.with_changes(
                body=[line.body[0].with_changes(annotation=_annotation(spmd_type, spelling))]
            )
        else:
            new.append(cst.parse_statement(f"{name}: {spmd_type.annotation(spelling)}"))
    at = 1 if statements and _is_docstring(statements[0]) else 0
    return body.with_changes(body=[*statements[:at], *new, *statements[at:]])


def overlaid(tree: cst.Module, module: str, overlay: ModuleOverlay) -> cst.Module:
    """The module ``module`` annotated with its overlay; OverlayError if an entry is stale."""
    command = OverlayCommand(CodemodContext(full_module_name=module), overlay)
    tree = command.transform_module(tree)
    if command.unmatched:
        raise OverlayError(f"overlay entries match nothing in {module}: {sorted(command.unmatched)}")
    return tree


def apply_overlay(code: str, module: str, overlay: ModuleOverlay) -> str:
    """:func:`overlaid` on source text."""
    return overlaid(cst.parse_module(code), module, overlay).code
