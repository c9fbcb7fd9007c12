"""``configurations``: named sets of flag values, and the one a run checks.

In pyproject.toml::

    [tool.spmd_mypy.configurations]
    sp = { sequence_parallel = true }
    no_sp = { sequence_parallel = false }

In mypy.ini / setup.cfg, one configuration a line::

    [spmd_mypy]
    configurations =
        sp: sequence_parallel = true, tp_mode = REDUCE_SCATTER
        no_sp: sequence_parallel = false, tp_mode = ALL_REDUCE

A flag's value is a boolean, an integer, a name (an enum member's:
``REDUCE_SCATTER`` decides ``mode == TensorParallelLinearMode.REDUCE_SCATTER``;
or a string's), or an enum member qualified by its class
(``TensorParallelLinearMode.REDUCE_SCATTER``, a module path before the
class allowed): the flag is then declared by its enum type too, and decides
every comparison with a member of that class, whatever the compared value
is called (:mod:`.conditions`).  One configuration sets at most one member
of a class, and a flag qualified in one configuration is qualified by the
same class in every one that sets it.  A run checks the configuration named
by the environment variable ``SPMD_MYPY_CONFIGURATION``, the first one
declared without it; ``spmd-check`` runs every one.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Union

ENVIRONMENT = "SPMD_MYPY_CONFIGURATION"
"""The environment variable that names the configuration a run checks."""

FlagValue = Union[bool, int, str]

_USAGE = ("declare each configuration as NAME = { FLAG = VALUE, ... } under [tool.spmd_mypy.configurations], "
          "or as a line NAME: FLAG = VALUE, ... of `configurations` in [spmd_mypy] "
          "(docs/checker.md#configurations)")


class DeclarationError(ValueError):
    """A configuration the checker cannot use; the message names it and the fix."""


@dataclass(frozen=True)
class Member:
    """An enum member a flag is set to, qualified by its class: ``TensorParallelLinearMode.REDUCE_SCATTER``."""

    enum: str
    """The class as written: ``TensorParallelLinearMode``, or with its module path
    (``nanotron.parallel.tensor_parallel.enum.TensorParallelLinearMode``)."""
    name: str
    """The member's name: ``REDUCE_SCATTER``."""

    @property
    def class_name(self) -> str:
        """The class's own name, how code before its analysis names it: ``TensorParallelLinearMode``."""
        return self.enum.rpartition(".")[2]

    def __str__(self) -> str:
        return f"{self.enum}.{self.name}"


def enum_member(value: FlagValue) -> Member | None:
    """The qualified enum member a flag's value names (``Class.MEMBER``); None for any other value."""
    if isinstance(value, str) and "." in value:
        enum, _, name = value.rpartition(".")
        return Member(enum, name)
    return None


def by_enum_type(flags: tuple[tuple[str, FlagValue], ...] | dict[str, FlagValue]) -> dict[str, Member]:
    """A configuration's flags declared by their enum type: each class's own name -> the member it is set to."""
    pairs = flags.items() if isinstance(flags, dict) else flags
    return {member.class_name: member for _, value in pairs if (member := enum_member(value)) is not None}


@dataclass(frozen=True)
class Configuration:
    """One set of flag values, e.g. ``sp``: ``sequence_parallel = True``."""

    name: str
    flags: tuple[tuple[str, FlagValue], ...]


def flag_names(configurations: tuple[Configuration, ...]) -> list[str]:
    """Every flag some configuration sets, sorted."""
    return sorted({flag for configuration in configurations for flag, _ in configuration.flags})


def parse(value: object) -> tuple[Configuration, ...]:
    """``configurations`` as written: a TOML table of tables, or ``name: flag = value, ...`` lines."""
    if isinstance(value, dict):
        entries = [(name, _table(name, flags)) for name, flags in value.items()]
    elif isinstance(value, str):
        entries = [_line(line) for line in value.splitlines() if line.strip()]
    else:
        raise DeclarationError(f"configurations must be a table, got {value!r}; {_USAGE}")
    names = [name for name, _ in entries]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise DeclarationError(f"configuration {', '.join(map(repr, repeated))} is declared twice; {_USAGE}")
    configurations = tuple(Configuration(name, tuple(flags.items())) for name, flags in entries)
    _check_enum_types(configurations)
    return configurations


def selected(configurations: tuple[Configuration, ...]) -> Configuration | None:
    """The configuration a run checks: the one ``$SPMD_MYPY_CONFIGURATION`` names, else the first."""
    name = os.environ.get(ENVIRONMENT)
    if not name:
        return configurations[0] if configurations else None
    for configuration in configurations:
        if configuration.name == name:
            return configuration
    declared = ", ".join(c.name for c in configurations) or "none"
    raise DeclarationError(f"{ENVIRONMENT}={name} names no configuration; declared: {declared}")


_NAME = re.compile(r"[A-Za-z_][\w-]*")


def _table(name: str, flags: object) -> dict[str, FlagValue]:
    if not _NAME.fullmatch(name):
        raise DeclarationError(f"configuration name {name!r} is not a name; {_USAGE}")
    if not isinstance(flags, dict) or not flags:
        raise DeclarationError(f"configuration {name!r} must set at least one flag, got {flags!r}; {_USAGE}")
    for flag, value in flags.items():
        if not flag.isidentifier():
            raise DeclarationError(f"configuration {name!r}: flag {flag!r} is not a Python name; {_USAGE}")
        problem = _bad_value(value)
        if problem:
            raise DeclarationError(f"configuration {name!r}: {flag} = {value!r} {problem}; {_USAGE}")
    return dict(flags)


_VALUE_NAME = re.compile(r"[A-Za-z_]\w*")
_QUALIFIED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_VALUES = ("must be a boolean, an integer, a name (an enum member's, such as REDUCE_SCATTER, or a string's "
           "without spaces) or an enum member qualified by its class, each part a Python name "
           "(TensorParallelLinearMode.REDUCE_SCATTER; a module path before the class is allowed)")


def _bad_value(value: object) -> str:
    """What is wrong with a flag's value ("" for nothing): a boolean, an integer, a name or a qualified enum
    member, never a string that decides nothing (empty, two words, a number or a boolean in quotes)."""
    if isinstance(value, (bool, int)):
        return ""
    if not isinstance(value, str):
        return "must be a boolean, an integer, a name or a qualified enum member"
    if value.lower() in ("true", "false"):
        return f"is the string {value!r}, which no flag's test compares equal to: write {value.lower()} unquoted"
    if re.fullmatch(r"[-+]?\d+", value):
        return f"is a string, which no flag's test compares equal to: write {value} unquoted"
    if not (_QUALIFIED if "." in value else _VALUE_NAME).fullmatch(value):
        return _VALUES
    return ""


def _check_enum_types(configurations: tuple[Configuration, ...]) -> None:
    """A flag declared by its enum type is one class's, in every configuration that sets it, and no
    configuration sets two members of one class (a comparison with its members could not tell which flag
    it reads)."""
    classes: dict[str, tuple[str | None, str, FlagValue]] = {}
    """flag -> its class as written (None: not a qualified member), the configuration that first sets it, the value."""
    for configuration in configurations:
        members: dict[str, tuple[str, Member]] = {}  # the class's own name -> (flag, member)
        for flag, value in configuration.flags:
            member = enum_member(value)
            written = member.enum if member is not None else None
            first = classes.setdefault(flag, (written, configuration.name, value))
            if first[0] != written:
                enum = first[0] or written
                raise DeclarationError(
                    f"configuration {configuration.name!r} sets {flag} = {_shown(value)} and configuration "
                    f"{first[1]!r} {flag} = {_shown(first[2])}: a flag declared by its enum type is set to a member of that class, "
                    f"qualified the same way, in every configuration that sets it (here {flag} = "
                    f"{enum}.{_member_name(first[2])} in {first[1]!r}, {enum}.{_member_name(value)} in "
                    f"{configuration.name!r}); {_USAGE}")
            if member is None:
                continue
            other = members.get(member.class_name)
            if other is not None and other[1] != member:
                raise DeclarationError(
                    f"configuration {configuration.name!r} sets {other[0]} = {other[1]} and {flag} = {member}: "
                    f"a comparison with a member of {member.class_name} could not tell which flag it reads. "
                    f"Write one of them unqualified ({flag} = {member.name}), read by its name only; {_USAGE}")
            members[member.class_name] = (flag, member)


def _shown(value: FlagValue) -> str:
    """A value as a configuration writes it (``true``, ``3``, ``REDUCE_SCATTER``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _member_name(value: FlagValue) -> str:
    """The member a value names, qualified or not (``MEMBER`` for a value that names none: a boolean)."""
    member = enum_member(value)
    return member.name if member is not None else value if isinstance(value, str) else "MEMBER"


def _line(line: str) -> tuple[str, dict[str, FlagValue]]:
    """``sp: sequence_parallel = true, tp_mode = REDUCE_SCATTER``."""
    name, colon, rest = line.partition(":")
    if not colon:
        raise DeclarationError(f"configuration line {line.strip()!r} has no ':'; {_USAGE}")
    flags: dict[str, FlagValue] = {}
    for assignment in filter(None, (part.strip() for part in rest.split(","))):
        flag, equals, value = assignment.partition("=")
        if not equals:
            raise DeclarationError(f"configuration {name.strip()!r}: {assignment!r} is not FLAG = VALUE; {_USAGE}")
        flags[flag.strip()] = _ini_value(value.strip())
    return name.strip(), _table(name.strip(), flags)


def _ini_value(text: str) -> FlagValue:
    """``true``/``false``, an integer, or a name; quotes keep a value a string (then checked as one)."""
    if text[:1] in "'\"" and text[-1:] == text[:1] and len(text) > 1:
        return text[1:-1]
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text
