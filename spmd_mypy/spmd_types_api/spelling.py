"""The fixes the checker writes, in spmd_types' spelling where the code speaks it.

The algebra's fixes name the spec's calls as ``spmd_stubs`` spells them
(``all_reduce(x, tp, src=P, dst=I)``); a module written for spmd_types
(it imports ``spmd_types`` and not ``spmd_stubs``) gets them as spmd_types
spells them (``spmd.all_reduce(x, "tp", src=spmd.P, dst=spmd.I)``), so the
fix applies in the user's own vocabulary.
"""

from __future__ import annotations

import re
from dataclasses import replace

from mypy.nodes import Import, ImportAll, ImportBase, ImportFrom, MypyFile

from spmd_stubs.core import SpmdTypeError

_RUNTIME_CHECKER = "spmd_types"
_OURS = "spmd_stubs"


def speaks_spmd_types(module: MypyFile | None) -> bool:
    """Whether ``module`` imports spmd_types and not spmd_stubs."""
    if module is None:
        return False
    imported = {name.split(".")[0] for node in module.imports for name in _imported(node)}
    return _RUNTIME_CHECKER in imported and _OURS not in imported


def _imported(node: ImportBase) -> list[str]:
    """The modules an import statement names (``import a, b``; ``from a import x``)."""
    if isinstance(node, Import):
        return [name for name, _ in node.ids]
    return [node.id] if isinstance(node, (ImportFrom, ImportAll)) else []


_CALL = re.compile(r"\b(all_reduce|all_gather|reduce_scatter|all_to_all|redistribute|convert|reinterpret)"
                   r"\((\{?\w+\}?), (\w+), src=(\w+(?:\(-?\d+\))?), dst=(\w+(?:\(-?\d+\))?)(, expert_mode=True)?\)")


def in_spmd_types_spelling(error: SpmdTypeError, axis_written: str) -> SpmdTypeError:
    """``error`` with each call it names on its axis in spmd_types' spelling, the axis as the call wrote it:
    ``all_reduce(x, tp, src=P, dst=R)`` -> ``spmd.all_reduce(x, group, src=spmd.P, dst=spmd.R)``.

    >>> from spmd_stubs.core import Code
    >>> error = SpmdTypeError(Code.COLLECTIVE, "tp", "Fix: all_reduce(x, tp, src=P, dst=I).")
    >>> in_spmd_types_spelling(error, "group").message
    'Fix (needs your choice): spmd.all_reduce(x, group, src=spmd.P, dst=spmd.I).'
    """

    def spelled(call: re.Match[str]) -> str:
        op, tensor, axis, src, dst, expert = call.groups()
        if axis != error.axis:
            return call.group(0)
        return f"spmd.{op}({tensor}, {axis_written}, src=spmd.{src}, dst=spmd.{dst}{expert or ''})"

    fix = error.fix and replace(error.fix, template=_CALL.sub(spelled, error.fix.template))
    return SpmdTypeError(error.code, error.axis, _CALL.sub(spelled, error.message), fix)


