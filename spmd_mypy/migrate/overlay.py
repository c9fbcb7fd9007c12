"""SPMD annotations declared outside a module's source, applied to a copy of it.

For third-party code nobody here maintains (fairscale, megatron-core): an
overlay file names functions, parameters and attributes and gives their
SPMD types; :class:`OverlayCommand` writes them into the module as
annotations, so the plugin checks the copy.  The format (TOML)::

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
input of ``forward``) is ``return = { tuple = ["I@tp", "None"] }``: each item
a type, or ``"None"`` alone.  An entry that matches nothing is an error: the
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
from libcst.codemod import CodemodContext, VisitorBasedCodemodCommand
from libcst.codemod.visitors import AddImportsVisitor

from spmd_stubs import core

__all__ = [
    "OverlayError", "SpmdType", "SpmdTuple", "ModuleOverlay", "load_overlays", "shipped_overlays", "overlay_file",
    "OverlayCommand", "apply_overlay",
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

    def annotation(self) -> str:
        """``Tensor[R@tp, V@dp]`` (the headline form), ``|``-joined for a union."""
        parts = [f"Tensor[{t}]" for t in self.alternatives] + (["None"] if self.optional else [])
        return " | ".join(parts)

    def imports(self) -> tuple[set[str], set[str]]:
        """(names from spmd_stubs, axes from spmd_stubs.axes) the annotation uses."""
        names, axes = {"Tensor"}, set()
        for tensor_type in self.alternatives:
            for axis, axis_type in tensor_type.axes:
                axes.add(axis)
                names.add("S" if axis_type.shard is not None else axis_type.kind.value)
        return names, axes


@dataclass(frozen=True)
class SpmdTuple:
    """A fixed tuple result: each item a tensor type (or union), or None."""

    items: tuple["SpmdType | None", ...]

    @classmethod
    def parse(cls, value: Any, where: str) -> "SpmdTuple":
        if set(value) != {"tuple"} or not isinstance(value["tuple"], list) or not value["tuple"]:
            raise OverlayError(f"{where}: a tuple result is written {{ tuple = [\"I@tp\", \"None\"] }}")
        return cls(tuple(
            None if item == "None" else SpmdType.parse(item, f"{where}[{index}]")
            for index, item in enumerate(value["tuple"])
        ))

    def annotation(self) -> str:
        """``tuple[Tensor[I@tp], None]``."""
        return "tuple[" + ", ".join("None" if t is None else t.annotation() for t in self.items) + "]"

    def imports(self) -> tuple[set[str], set[str]]:
        names: set[str] = set()
        axes: set[str] = set()
        for item in self.items:
            if item is not None:
                item_names, item_axes = item.imports()
                names |= item_names
                axes |= item_axes
        return names, axes


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

    def annotation(self) -> str:
        """The alias's name, from what it chooses: ``_spmd_sequence_parallel_S0_tp_I_tp``."""
        return "_".join(["_spmd", self.flag, _identifier(self.then), _identifier(self.otherwise)])

    def alias(self) -> str:
        """``<name> = Tensor[S[0, tp]] if spmd_stubs.flags.<flag> else Tensor[I[tp]]``: an alias needs
        the canonical spelling (the ``@`` form is read from annotations only)."""
        return (f"{self.annotation()} = {_canonical(self.then)} if spmd_stubs.flags.{self.flag} "
                f"else {_canonical(self.otherwise)}")

    def imports(self) -> tuple[set[str], set[str]]:
        then_names, then_axes = self.then.imports()
        else_names, else_axes = self.otherwise.imports()
        return then_names | else_names, then_axes | else_axes


def _identifier(spmd_type: SpmdType) -> str:
    """``S(-1)@tp`` -> ``Sm1_tp``."""
    return re.sub(r"\W+", "_", spmd_type.annotation().replace("Tensor", "").replace("-", "m")).strip("_")


def _canonical(spmd_type: SpmdType) -> str:
    """``Tensor[S[0, tp], R[dp]] | None``."""
    parts = [f"Tensor[{', '.join(_canonical_axis(axis, t) for axis, t in tensor.axes)}]"
             for tensor in spmd_type.alternatives]
    return " | ".join(parts + (["None"] if spmd_type.optional else []))


def _canonical_axis(axis: str, axis_type: core.AxisType) -> str:
    if axis_type.order is not None:
        raise OverlayError(f"S({axis_type.shard})@({axis}, ...): a flag-chosen type cannot order a dim's shards")
    if axis_type.shard is not None:
        return f"S[{axis_type.shard}, {axis}]"
    return f"{axis_type}[{axis}]"


def _parse_type(value: Any, where: str) -> "SpmdType | SpmdChoice":
    return SpmdChoice.parse(value, where) if isinstance(value, dict) else SpmdType.parse(value, where)


def _parse_entry(name: str, value: Any, where: str) -> "SpmdType | SpmdTuple | SpmdChoice":
    if name == "return" and isinstance(value, dict) and "if" not in value:
        return SpmdTuple.parse(value, where)
    return _parse_type(value, where)


@dataclass
class ModuleOverlay:
    """The entries for one module: ``functions[path][param or "return"]``, ``attributes[path]``."""

    functions: dict[str, dict[str, SpmdType | SpmdTuple | SpmdChoice]] = field(default_factory=dict)
    attributes: dict[str, SpmdType | SpmdChoice] = field(default_factory=dict)

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


Declared = SpmdType | SpmdTuple | SpmdChoice


def _annotation(spmd_type: Declared) -> cst.Annotation:
    return cst.Annotation(cst.parse_expression(spmd_type.annotation()))


class OverlayCommand(VisitorBasedCodemodCommand):
    """Write one module's overlay entries into it as annotations."""

    DESCRIPTION = "Apply SPMD annotations declared in an overlay file."

    def __init__(self, context: CodemodContext, overlay: ModuleOverlay) -> None:
        super().__init__(context)
        self.overlay = overlay
        self.unmatched = {*overlay.functions, *overlay.attributes}
        self._path: list[str] = []
        self._choices: dict[str, SpmdChoice] = {}

    def _use(self, spmd_type: Declared) -> None:
        if isinstance(spmd_type, SpmdChoice):
            self._choices[spmd_type.annotation()] = spmd_type
            AddImportsVisitor.add_needed_import(self.context, "spmd_stubs")
        names, axes = spmd_type.imports()
        for name in sorted(names):
            AddImportsVisitor.add_needed_import(self.context, "spmd_stubs", name)
        for axis in sorted(axes):
            AddImportsVisitor.add_needed_import(self.context, "spmd_stubs.axes", axis)

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
            params=_annotate_params(updated_node.params, entry),
            returns=_annotation(entry["return"]) if "return" in entry else updated_node.returns,
        )

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        """The flag-chosen aliases, before the module's first class or function (after its imports)."""
        if not self._choices:
            return updated_node
        body = list(updated_node.body)
        at = next((i for i, s in enumerate(body) if isinstance(s, (cst.ClassDef, cst.FunctionDef))), len(body))
        aliases = [cst.parse_statement(choice.alias()) for _, choice in sorted(self._choices.items())]
        return updated_node.with_changes(body=[*body[:at], *aliases, *body[at:]])

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
        return updated_node.with_changes(body=_declare_attributes(updated_node.body, declared))


def _all_params(params: cst.Parameters) -> list[cst.Param]:
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    return every + [p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]


def _annotate_params(params: cst.Parameters, entry: dict[str, Declared]) -> cst.Parameters:
    def annotate(param: cst.Param) -> cst.Param:
        spmd_type = entry.get(param.name.value)
        return param if spmd_type is None else param.with_changes(annotation=_annotation(spmd_type))

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


def _declare_attributes(body: cst.BaseSuite, declared: dict[str, SpmdType | SpmdChoice]) -> cst.BaseSuite:
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
                body=[line.body[0].with_changes(annotation=_annotation(spmd_type))]
            )
        else:
            new.append(cst.parse_statement(f"{name}: {spmd_type.annotation()}"))
    at = 1 if statements and _is_docstring(statements[0]) else 0
    return body.with_changes(body=[*statements[:at], *new, *statements[at:]])


def apply_overlay(code: str, module: str, overlay: ModuleOverlay) -> str:
    """Annotate ``code`` (the module ``module``) with its overlay; OverlayError if an entry is stale."""
    command = OverlayCommand(CodemodContext(full_module_name=module), overlay)
    tree = command.transform_module(cst.parse_module(code))
    if command.unmatched:
        raise OverlayError(f"overlay entries match nothing in {module}: {sorted(command.unmatched)}")
    return tree.code
