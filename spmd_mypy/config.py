"""The plugin's settings: ``[spmd_mypy]`` in mypy.ini/setup.cfg, ``[tool.spmd_mypy]`` in pyproject.toml.

Keys:

``strict`` (default false)
    Report every place a typed value loses its SPMD type: ops the checker
    does not model (``spmd-unmodelled``), operands that do not mention an
    axis the other operands of the same op do (``spmd-missing-axis``), and
    boundaries that forget it (``spmd-untyped-boundary``,
    :mod:`spmd_mypy.untyped_boundaries`).
``allow_redefinition`` (default true)
    Turn on mypy's flexible redefinition so ``x = all_reduce(x, ...)`` may
    give ``x`` a new SPMD type, unless the user's own mypy settings decide
    (:func:`user_decides_redefinition`).  Set false to never turn it on.
``show_fixes`` (default false)
    Follow every SPMD diagnostic with a note that carries its fix as an edit
    a tool can apply (:mod:`spmd_mypy.fixes`), or says that it needs a choice.
``groups`` (default none)
    Which process-group expressions mean which mesh axis, each ``name: axis``:
    a function's full name (its call's result is the group) or ``*.attr``
    (any attribute of that name, and a variable or parameter of that name).  A TOML table in pyproject.toml, comma- or
    newline-separated pairs in mypy.ini / setup.cfg.  Read by the plugin
    (:mod:`spmd_mypy.groups`) and by ``spmd-migrate``.
``sizes`` (default none)
    Which expressions are the size of a mesh axis's group, in the form of
    ``groups``: a function's full name (Megatron's
    ``get_tensor_model_parallel_world_size``) or ``*.attr``, which also
    covers a plain name ``attr``.  A branch that tests one for 1 is checked
    with that axis trivial (docs/spec.md#axes-of-size-1).
``collectives`` (default none)
    Functions that are a torch.distributed collective under another name,
    each ``name: torch.distributed.COLLECTIVE`` (nanotron's
    ``nanotron.distributed.all_gather_into_tensor:
    torch.distributed.all_gather_into_tensor``): their calls are typed as
    torch's, argument by argument name.
``configurations`` (default none)
    Named sets of the run-time flags layers test (``sp = { sequence_parallel
    = true }``): a run checks one (``$SPMD_MYPY_CONFIGURATION``, else the
    first), ``spmd-check`` every one (:mod:`spmd_mypy.configurations`).
``modules`` (default none)
    The class a sub-module attribute holds at run time, in the form of
    ``groups``: ``OWNER.attr: CLASS`` (picotron's
    ``picotron.model.Attention.q_proj:
    picotron.tensor_parallel.tensor_parallel.ColumnParallelLinear``), or
    ``OWNER.attr[*]: CLASS`` for the items of an ``nn.ModuleList``,
    ``nn.ModuleDict`` or ``nn.Sequential`` attribute.  Full names of classes;
    reading the attribute gives the class (:mod:`spmd_mypy.runtime_classes`).
    ``CLASS(flag=literal, ...)`` also states the literal constructor
    arguments that decide the instance's flags (picotron's LM head:
    ``ColumnParallelLinear(gather_output=True)``).
``meshes`` (default none)
    The meshes a model runs on over the same ranks, ``NAME: (axis, ...)``
    each (``dense: (dp, cp, tp), experts: (dp, ep)``; a TOML table of lists
    in pyproject.toml): a value of one passed where a type on another is
    declared is ``spmd-mesh``, with ``reinterpret_mesh`` as the fix
    (:mod:`spmd_mypy.mesh_transitions`).
``current_mesh`` (default none)
    The axes of the mesh spmd_types' ``set_current_mesh`` makes current,
    comma-separated (``dp, cp, tp``; a TOML list in pyproject.toml): where a
    spmd_types call writes a bare type (``spmd.assert_type(x, spmd.V)``), it
    is that type on each of these axes.  Without it a bare type is unknown
    (:mod:`spmd_mypy.spmd_types_api.reading`).

Each flag can also be set in the environment, which wins over the file
(``SPMD_MYPY_STRICT=true``): mypy hands its environment to every worker
process it starts, so a tool's override reaches them all.

This module imports mypy only to find the config file the way mypy does
(:func:`find_config_file`): ``spmd-migrate`` reads the same settings.
"""

from __future__ import annotations

import ast
import configparser
import difflib
import io
import os
import re
import tomllib
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, Iterator

from spmd_mypy.configurations import declared

SECTION = "spmd_mypy"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_FLAGS = ("strict", "allow_redefinition", "show_fixes")
_TABLES = ("groups", "sizes", "collectives", "configurations", "modules", "current_mesh", "meshes")
COLLECTIVE_PREFIX = "torch.distributed."


class ConfigError(ValueError):
    """A setting with a value the checker cannot use; the message names the key and the fix."""


@dataclass(frozen=True)
class AxisNames:
    """``groups`` or ``sizes``: names of process groups (or of their sizes) -> the mesh axis each is of.

    ``functions`` holds full names of functions whose call returns the group
    (the size), ``attributes`` the attribute names declared as ``*.attr``.
    """

    functions: tuple[tuple[str, str], ...] = ()
    attributes: tuple[tuple[str, str], ...] = ()

    def of_function(self, fullname: str) -> str | None:
        """The axis of the group ``fullname()`` returns, if declared."""
        return dict(self.functions).get(fullname)

    def of_attribute(self, name: str) -> str | None:
        """The axis of the group (the size) any ``<expr>.name`` or plain ``name`` holds, if declared."""
        return dict(self.attributes).get(name)

    def short_function_names(self) -> set[str]:
        """The declared functions' own names (``get_tensor_model_parallel_world_size``), as a call may spell them."""
        return {fullname.rpartition(".")[2] for fullname, _ in self.functions}

    def as_dict(self) -> dict[str, str]:
        """The declaration as written (``*.attr`` keys for attributes), in JSON's types (mypy's cache)."""
        return {**dict(self.functions), **{f"*.{name}": axis for name, axis in self.attributes}}


@dataclass(frozen=True)
class RuntimeClass:
    """One ``modules`` entry: ``owner.attribute`` (its items, where ``items``) holds a ``cls`` at run time."""

    owner: str
    attribute: str
    cls: str
    items: bool = False
    arguments: tuple[tuple[str, bool | int | str], ...] = ()
    """The literal constructor arguments the entry states (``ColumnParallelLinear(gather_output=True)``): they
    decide the instance's flags as a construction's literals do (docs/spec.md#flags-per-instance)."""

    @property
    def written(self) -> str:
        """The entry's name as the settings write it (``picotron.model.Llama.decoder_layers[*]``)."""
        return f"{self.owner}.{self.attribute}{'[*]' if self.items else ''}"

    @property
    def held(self) -> str:
        """The class as the settings write it, with its arguments (``...ColumnParallelLinear(gather_output=True)``)."""
        given = ", ".join(f"{name}={value!r}" for name, value in self.arguments)
        return f"{self.cls}({given})" if self.arguments else self.cls


@dataclass(frozen=True)
class Config:
    strict: bool = False
    allow_redefinition: bool = True
    show_fixes: bool = False
    groups: AxisNames = AxisNames()
    sizes: AxisNames = AxisNames()
    collectives: tuple[tuple[str, str], ...] = ()
    """A function's full name -> the torch.distributed collective it is (``torch.distributed.all_reduce``)."""
    configurations: tuple[declared.Configuration, ...] = ()
    configuration: declared.Configuration | None = None
    """The configuration this run checks (one of ``configurations``)."""
    modules: tuple[RuntimeClass, ...] = ()
    """The classes sub-module attributes hold at run time (:mod:`spmd_mypy.runtime_classes`)."""
    current_mesh: tuple[str, ...] = ()
    """The axes a bare spmd_types type (``spmd.V``) stands for; empty: a bare type is unknown."""
    meshes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """The meshes over the same ranks (name, axes outermost first): a value crosses between them only by
    ``reinterpret_mesh`` (:mod:`spmd_mypy.mesh_transitions`)."""

    def as_dict(self) -> dict[str, Any]:
        """The settings verdicts depend on, in JSON's types (mypy's cache compares them as stored)."""
        active = self.configuration
        return {**asdict(self), "groups": self.groups.as_dict(), "sizes": self.sizes.as_dict(),
                "collectives": dict(self.collectives), "configurations": None,
                "configuration": None if active is None else {"name": active.name, "flags": dict(active.flags)},
                "modules": {entry.written: entry.held for entry in self.modules}}


def environment_variable(flag: str) -> str:
    """``strict`` -> ``SPMD_MYPY_STRICT``: the variable that sets a flag whatever the config file says."""
    return f"{SECTION.upper()}_{flag.upper()}"


@contextmanager
def overriding(**flags: bool) -> Iterator[None]:
    """Within the block, these flags as given whatever the config file says (a tool's in-process run:
    the coverage report checks in ``strict`` mode).  They are set in the environment, which mypy hands
    every worker process it starts, and are part of the settings mypy's cache keys on."""
    unknown = set(flags) - set(_FLAGS)
    if unknown:
        raise ValueError(f"not a flag of [{SECTION}]: {', '.join(sorted(unknown))}")
    saved = {flag: os.environ.get(environment_variable(flag)) for flag in flags}
    os.environ.update({environment_variable(flag): str(value).lower() for flag, value in flags.items()})
    try:
        yield
    finally:
        for flag, value in saved.items():
            if value is None:
                os.environ.pop(environment_variable(flag), None)
            else:
                os.environ[environment_variable(flag)] = value


def _from_environment() -> dict[str, bool]:
    """The flags set in the environment (:func:`environment_variable`)."""
    found = {flag: os.environ.get(environment_variable(flag)) for flag in _FLAGS}
    return {flag: _flag(f"${environment_variable(flag)}", value) for flag, value in found.items() if value is not None}


def load(config_file: str | None) -> Config:
    """Read the settings from mypy's config file (defaults where absent); :class:`ConfigError` if one is bad.

    The error names the section as the file writes it: ``[tool.spmd_mypy]`` in pyproject.toml.
    """
    try:
        return _load(config_file)
    except ConfigError as error:
        if config_file and config_file.endswith(".toml") and str(error).startswith(f"[{SECTION}]"):
            raise ConfigError(f"[tool.{SECTION}]{str(error).removeprefix(f'[{SECTION}]')}") from None
        raise


def _load(config_file: str | None) -> Config:
    sections = _sections(config_file)
    misspelt = _misspelt_sections(sections)
    if misspelt:
        shown = ", ".join(f"[{name}]" for name in misspelt)
        raise ConfigError(f"{shown} looks like [{SECTION}] misspelt: the checker reads its settings from "
                          f"[{SECTION}] only; rename the section (docs/checker.md#settings)")
    section = sections.get(SECTION, {})
    unknown = sorted(set(section) - {*_FLAGS, *_TABLES})
    if unknown:
        raise ConfigError(f"[{SECTION}] has no setting {', '.join(_unknown(key, section[key]) for key in unknown)}: "
                          f"the settings are {', '.join((*_FLAGS, *_TABLES))} (docs/checker.md#settings)")
    toml = bool(config_file and config_file.endswith(".toml"))
    flags = {key: _flag(key, section[key], toml) for key in _FLAGS if key in section}
    try:
        configurations = declared.parse(section.get("configurations", {}))
        configuration = declared.selected(configurations)
    except declared.DeclarationError as error:
        raise ConfigError(f"[{SECTION}] {error}") from None
    return Config(**{**flags, **_from_environment()}, groups=parse_axis_names("groups", section.get("groups", {})),
                  sizes=parse_axis_names("sizes", section.get("sizes", {})),
                  collectives=parse_collectives(section.get("collectives", {})),
                  configurations=configurations, configuration=configuration,
                  modules=parse_runtime_classes(section.get("modules", {})),
                  current_mesh=parse_current_mesh(section.get("current_mesh", ())),
                  meshes=parse_meshes(section.get("meshes", {})))


def _unknown(key: str, value: object) -> str:
    """``'strikt' (set to true; did you mean 'strict'?)``."""
    close = difflib.get_close_matches(key, (*_FLAGS, *_TABLES), n=1)
    written = str(value).lower() if isinstance(value, bool) else repr(value)
    return f"{key!r} (set to {written}{f'; did you mean {close[0]!r}?' if close else ''})"


def find_config_file() -> str | None:
    """The config file mypy reads when run here without ``--config-file``: mypy's own search.

    The current directory and its parents up to the repository root
    (``mypy.ini``, ``.mypy.ini``, then ``pyproject.toml`` and ``setup.cfg``
    where they configure mypy), then the user's files
    (``$XDG_CONFIG_HOME/mypy/config``, ``~/.config/mypy/config``,
    ``~/.mypy.ini``).  A file mypy cannot read is a :class:`ConfigError`
    naming it, not a silent run without it.
    """
    from mypy.config_parser import _find_config_file  # the checker's tools run mypy: it is installed

    said = io.StringIO()
    found = _find_config_file(said)
    if said.getvalue().strip():
        raise ConfigError(f"{said.getvalue().strip()} (mypy cannot read this config file)")
    return os.path.abspath(found[2]) if found is not None else None


def names_the_plugin(plugins: object) -> bool:
    """Whether mypy's ``plugins`` setting (a comma-separated string, or a TOML list) loads this plugin."""
    entries = plugins.split(",") if isinstance(plugins, str) else plugins if isinstance(plugins, list) else []
    for entry in entries:
        module = str(entry).strip().rpartition(":")[0] or str(entry).strip()
        if module == SECTION or module.replace("\\", "/").endswith(f"{SECTION}/__init__.py"):
            return True
    return False


def plugin_missing(config_file: str | None) -> str | None:
    """Why a run with this config would check without the plugin (the fix included), None where it loads it."""
    if names_the_plugin(mypy_setting(config_file, "plugins")):
        return None
    where = config_file or "no config file (mypy found none)"
    return (f"the spmd_mypy plugin is not enabled in {where}, so mypy would check nothing of the SPMD types: "
            "add plugins = spmd_mypy under [mypy] (plugins = [\"spmd_mypy\"] under [tool.mypy] in "
            "pyproject.toml; docs/checker.md#enabling-it)")


def mypy_setting(config_file: str | None, key: str) -> Any:
    """One of mypy's own settings (``[mypy]`` / ``[tool.mypy]``) as written; None where absent."""
    return _section(config_file, "mypy").get(key)


def _section(config_file: str | None, name: str) -> dict[str, Any]:
    """``[name]`` of mypy's config file (``[tool.name]`` in pyproject.toml); empty where absent."""
    section: dict[str, Any] = _sections(config_file).get(name, {})
    return section


def _sections(config_file: str | None) -> dict[str, Any]:
    """Every section of mypy's config file by name (pyproject.toml: the ``[tool.*]`` tables), read as mypy
    reads it (no ``%`` interpolation); :class:`ConfigError` naming the file where it cannot be read."""
    if not config_file or not os.path.isfile(config_file):
        return {}
    try:
        with open(config_file, "rb") as handle:
            raw = handle.read()
        if raw.startswith(b"\xef\xbb\xbf"):
            raise ConfigError(f"{config_file} starts with a UTF-8 byte-order mark, which mypy's config reader "
                              "does not accept (it then reads no settings at all): save it as UTF-8 without one")
        if config_file.endswith(".toml"):
            tools: dict[str, Any] = tomllib.loads(raw.decode("utf-8")).get("tool", {})
            return tools
        parser = configparser.RawConfigParser()
        parser.read_string(raw.decode("utf-8"), source=config_file)
        return {name: dict(parser[name]) for name in parser.sections()}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, configparser.Error) as error:
        raise ConfigError(f"{config_file} cannot be read: {error}") from None


def _misspelt_sections(sections: dict[str, Any]) -> list[str]:
    """Section names that look like ours but are not (``[spmd-mypy]``, ``[spmd_mpy]``): the checker would
    read none of their settings."""
    def squashed(name: str) -> str:
        return re.sub(r"[^a-z]", "", name.lower())

    return [name for name in sections if name != SECTION and not name.startswith("mypy")
            and (squashed(name) == squashed(SECTION) or difflib.get_close_matches(name, [SECTION], cutoff=0.8))]


REDEFINITION_KEYS = ("allow_redefinition", "allow_redefinition_old", "allow_redefinition_new")


def user_decides_redefinition(config_file: str | None) -> bool:
    """Whether the user's own ``[mypy]`` section sets how names may be redefined.

    The plugin then leaves mypy's setting as the user wrote it.
    """
    section = _section(config_file, "mypy")
    return any(key in section or key.replace("_", "-") in section for key in REDEFINITION_KEYS)


def _flag(key: str, value: object, toml: bool = False) -> bool:
    """A flag's value: a TOML boolean in pyproject.toml; in an INI file or the environment, true/false
    (or yes/no, on/off, 1/0)."""
    if isinstance(value, bool):
        return value
    if toml:
        raise ConfigError(f"[{SECTION}] {key} must be true or false (a TOML boolean, unquoted), got {value!r}")
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    name = key if key.startswith("$") else f"[{SECTION}] {key}"
    raise ConfigError(f"{name} must be true or false, got {value!r}")


_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_NAMES_USAGE = (
    "write each entry as NAME: AXIS, where NAME is a function's full name "
    "(megatron.core.parallel_state.get_tensor_model_parallel_group) or *.ATTRIBUTE (*.tp_group) "
    "and AXIS a mesh axis name (tp)"
)
_COLLECTIVES_USAGE = (
    "write each entry as NAME: torch.distributed.COLLECTIVE, where NAME is the full name of a function that "
    "calls that collective with the same parameter names "
    "(nanotron.distributed.all_gather_into_tensor: torch.distributed.all_gather_into_tensor)"
)

_MODULES_USAGE = (
    "write each entry as OWNER.ATTRIBUTE: CLASS, with the full names of the owner class and of the class the "
    "attribute holds at run time (picotron.model.Attention.q_proj: "
    "picotron.tensor_parallel.tensor_parallel.ColumnParallelLinear), or OWNER.ATTRIBUTE[*]: CLASS for the items "
    "of an nn.ModuleList, nn.ModuleDict or nn.Sequential (picotron.model.Llama.decoder_layers[*]: "
    "picotron.model.DecoderLayer); in pyproject.toml quote each name"
)
_CLASS_FULLNAME = re.compile(r"(?P<cls>[A-Za-z_]\w*(\.[A-Za-z_]\w*)+)(\((?P<arguments>.*)\))?", re.DOTALL)
_OWNER_ATTRIBUTE = re.compile(r"(?P<owner>[A-Za-z_]\w*(\.[A-Za-z_]\w*)+)\.(?P<attribute>[A-Za-z_]\w*)(?P<items>\[\*\])?")


def parse_axis_names(key: str, value: object) -> AxisNames:
    """``groups`` or ``sizes`` as written: a TOML table, or ``name: axis`` pairs separated by commas or newlines."""
    functions, attributes = [], []
    for name, axis in _pairs(key, value, _NAMES_USAGE):
        if not isinstance(axis, str) or not axis.strip().isidentifier():
            raise ConfigError(f"[{SECTION}] {key}: the axis of {name!r} must be a mesh axis name, got {axis!r}; "
                              f"{_NAMES_USAGE}")
        attribute = name.removeprefix("*.")
        if name != attribute and attribute.isidentifier():
            attributes.append((attribute, axis.strip()))
        elif _DOTTED.fullmatch(name):
            functions.append((name, axis.strip()))
        else:
            raise ConfigError(f"[{SECTION}] {key}: {name!r} is not a function's full name or *.ATTRIBUTE; "
                              f"{_NAMES_USAGE}")
    return AxisNames(tuple(functions), tuple(attributes))


def parse_current_mesh(value: object) -> tuple[str, ...]:
    """``current_mesh`` as written: ``dp, cp, tp`` (a TOML list of names in pyproject.toml)."""
    names = [str(name).strip() for name in value] if isinstance(value, (list, tuple)) else (
        [name.strip() for name in value.split(",")] if isinstance(value, str) else None)
    if names is None or not all(name.isidentifier() for name in names) or len(set(names)) != len(names):
        raise ConfigError(f"[{SECTION}] current_mesh must name each axis of the current mesh once, comma-separated "
                          f"(current_mesh = dp, cp, tp), got {value!r}")
    return tuple(names)


def parse_meshes(value: object) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``meshes`` as written: ``NAME: (axis, ...)`` pairs (a TOML table of lists in pyproject.toml)."""
    declared: dict[str, tuple[str, ...]] = {}
    for name, axes in _pairs("meshes", value, _MESHES_USAGE, "axes"):
        names = [str(a).strip() for a in axes] if isinstance(axes, list) else (
            [a.strip() for a in axes.strip().removeprefix("(").removesuffix(")").split(",")]
            if isinstance(axes, str) else None)
        if not name.isidentifier() or names is None or not names or not all(a.isidentifier() for a in names) \
                or len(set(names)) != len(names):
            raise ConfigError(f"[{SECTION}] meshes: {name!r} must name a mesh and each of its axes once, got "
                              f"{axes!r}; {_MESHES_USAGE}")
        if name in declared:
            raise ConfigError(f"[{SECTION}] meshes: mesh {name!r} is declared twice; keep one")
        declared[name] = tuple(names)
    return tuple(declared.items())


_MESHES_USAGE = "write NAME: (axis, ...) per mesh, outermost axis first (meshes = dense: (dp, cp, tp), experts: (dp, ep))"


def parse_collectives(value: object) -> tuple[tuple[str, str], ...]:
    """``collectives`` as written: ``name: torch.distributed.COLLECTIVE`` pairs (a TOML table in pyproject.toml)."""
    declared = []
    for name, target in _pairs("collectives", value, _COLLECTIVES_USAGE, "collective"):
        target = target.strip() if isinstance(target, str) else target
        if not _DOTTED.fullmatch(name) or "." not in name:
            raise ConfigError(f"[{SECTION}] collectives: {name!r} is not a function's full name; {_COLLECTIVES_USAGE}")
        if not (isinstance(target, str) and target.startswith(COLLECTIVE_PREFIX)
                and target.removeprefix(COLLECTIVE_PREFIX).isidentifier()):
            raise ConfigError(f"[{SECTION}] collectives: {name!r} must name a torch.distributed collective, got "
                              f"{target!r}; {_COLLECTIVES_USAGE}")
        declared.append((name, target))
    return tuple(declared)


def parse_runtime_classes(value: object) -> tuple[RuntimeClass, ...]:
    """``modules`` as written: ``OWNER.attr: CLASS`` (or ``OWNER.attr[*]: CLASS``) pairs, a TOML table in
    pyproject.toml."""
    declared, seen = [], set()
    for name, target in _pairs("modules", value, _MODULES_USAGE, "class"):
        if isinstance(target, dict):
            unquoted = _first_dotted_key(name, target)
            raise ConfigError(f"[{SECTION}] modules: {unquoted} is read by TOML as nested tables: quote the whole "
                              f"name (\"{unquoted}\" = \"CLASS\"); {_MODULES_USAGE}")
        match = _OWNER_ATTRIBUTE.fullmatch(name)
        if match is None:
            raise ConfigError(f"[{SECTION}] modules: {name!r} is not an owner class's full name and an attribute; "
                              f"{_MODULES_USAGE}")
        held = _CLASS_FULLNAME.fullmatch(target.strip()) if isinstance(target, str) else None
        if held is None:
            raise ConfigError(f"[{SECTION}] modules: the class of {name!r} must be a class's full name, got "
                              f"{target!r}; {_MODULES_USAGE}")
        if name in seen:
            raise ConfigError(f"[{SECTION}] modules: {name!r} is declared twice; keep one class for it")
        seen.add(name)
        declared.append(RuntimeClass(match.group("owner"), match.group("attribute"), held.group("cls"),
                                     items=bool(match.group("items")),
                                     arguments=_constructor_arguments(name, held.group("arguments"))))
    return tuple(declared)


def _constructor_arguments(name: str, written: str | None) -> tuple[tuple[str, bool | int | str], ...]:
    """``gather_output=True, mode="x"`` -> its keyword arguments, each a literal a flag may take."""
    if not written or not written.strip():
        return ()
    try:
        call = ast.parse(f"f({written})", mode="eval").body
    except SyntaxError:
        call = None
    arguments = []
    for keyword in call.keywords if isinstance(call, ast.Call) and not call.args else [None]:
        value = keyword.value if keyword is not None else None
        if keyword is None or keyword.arg is None or not isinstance(value, ast.Constant) or \
                not isinstance(value.value, (bool, int, str)):
            raise ConfigError(f"[{SECTION}] modules: the arguments of {name!r} must be keyword arguments with "
                              f"literal values (gather_output=True), got ({written}); {_MODULES_USAGE}")
        arguments.append((keyword.arg, value.value))
    return tuple(arguments)


def _first_dotted_key(name: str, table: dict[str, Any]) -> str:
    """``picotron`` and ``{"model": {"Attention": {"q_proj": ...}}}`` -> ``picotron.model.Attention.q_proj``."""
    for key, value in table.items():
        return _first_dotted_key(f"{name}.{key}", value) if isinstance(value, dict) else f"{name}.{key}"
    return name


def _pairs(key: str, value: object, usage: str, missing: str = "axis") -> list[tuple[str, object]]:
    """A TOML table's items, or ``a.f: tp, *.g: dp`` (or one pair per line) -> ``[("a.f", "tp"), ("*.g", "dp")]``."""
    if isinstance(value, dict):
        return [(name.strip(), item) for name, item in value.items()]
    if not isinstance(value, str):
        raise ConfigError(f"[{SECTION}] {key} must be a table of NAME = VALUE, got {value!r}; {usage}")
    pairs: list[tuple[str, object]] = []
    # A comma inside parentheses (a class's arguments in ``modules``) does not end a pair.
    for entry in filter(None, (part.strip() for part in re.split(r"\n|,(?![^(]*\))", value))):
        name, colon, item = entry.rpartition(":")
        if not colon:
            raise ConfigError(f"[{SECTION}] {key}: {entry!r} has no {missing}; {usage}")
        pairs.append((name.strip(), item))
    return pairs
