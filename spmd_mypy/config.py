"""The plugin's settings: ``[spmd_mypy]`` in mypy.ini/setup.cfg, ``[tool.spmd_mypy]`` in pyproject.toml.

Keys:

``strict`` (default false)
    Report ops the checker does not model when they get a typed tensor
    (``spmd-unmodelled``), and operands that do not mention an axis the other
    operands of the same op do (``spmd-missing-axis``).
``allow_redefinition`` (default true)
    Turn on mypy's flexible redefinition so ``x = all_reduce(x, ...)`` may
    give ``x`` a new SPMD type, unless the user's own mypy settings decide
    (:func:`user_decides_redefinition`).  Set false to never turn it on.
``show_fixes`` (default false)
    Follow every SPMD diagnostic with a note that carries its fix as an edit
    a tool can apply (:mod:`spmd_mypy.fixes`), or says that it needs a choice.
"""

from __future__ import annotations

import configparser
import os
import tomllib
from dataclasses import asdict, dataclass
from typing import Any

SECTION = "spmd_mypy"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Config:
    strict: bool = False
    allow_redefinition: bool = True
    show_fixes: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def load(config_file: str | None) -> Config:
    """Read the settings from mypy's config file (defaults where absent)."""
    section = _section(config_file, SECTION)
    return Config(**{key: _flag(key, section[key]) for key in Config.__dataclass_fields__ if key in section})


def _section(config_file: str | None, name: str) -> dict[str, Any]:
    """``[name]`` of mypy's config file (``[tool.name]`` in pyproject.toml); empty where absent."""
    if not config_file or not os.path.isfile(config_file):
        return {}
    if config_file.endswith(".toml"):
        with open(config_file, "rb") as handle:
            table: dict[str, Any] = tomllib.load(handle).get("tool", {}).get(name, {})
            return table
    parser = configparser.ConfigParser()
    parser.read(config_file)
    return dict(parser[name]) if parser.has_section(name) else {}


REDEFINITION_KEYS = ("allow_redefinition", "allow_redefinition_old", "allow_redefinition_new")


def user_decides_redefinition(config_file: str | None) -> bool:
    """Whether the user's own ``[mypy]`` section sets how names may be redefined.

    The plugin then leaves mypy's setting as the user wrote it.
    """
    section = _section(config_file, "mypy")
    return any(key in section or key.replace("_", "-") in section for key in REDEFINITION_KEYS)


def _flag(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise ValueError(f"[{SECTION}] {key} must be true or false, got {value!r}")
