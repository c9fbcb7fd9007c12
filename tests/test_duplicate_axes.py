"""A mesh axis given twice: one exception, one message shape, at every entry point.

Regression test: the check used to exist in six copies with three exception
types (``ValueError``, ``TypeError``, the plugin's ``AnnotationError``) and as
many wordings.  Every copy now goes through
:func:`spmd_stubs.core.axis_types.tensor_type_from` (types per axis) or
:func:`~spmd_stubs.core.axis_types.distinct_axes` (plain axis names), which
raise :class:`~spmd_stubs.core.axis_types.DuplicateAxisError`, a
``ValueError``.  The plugin reports the same text as an ``spmd-annotation``
error.
"""

from __future__ import annotations

import fcntl
import re
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

from spmd_mypy.annotations import AnnotationError
from spmd_mypy.annotations import tensor_type_of as plugin_tensor_type_of
from spmd_stubs import I, R, S, V
from spmd_stubs.axes import dp, tp
from spmd_stubs.core import Code, SpmdTypeError, TensorType, parse_axis_type
from spmd_stubs.core.axis_types import DuplicateAxisError, distinct_axes, tensor_type_from
from spmd_stubs.mesh import group_and_size, group_of
from spmd_stubs.ops import linear
from spmd_stubs.regions import global_spmd, local_map
from spmd_stubs.types import tensor_type_of
from tests.plugin.harness import config_text, run_mypy

SHAPE = re.compile(
    r"^(?:(?P<where>.+): )?axis (?P<axis>\w+) is given twice "
    r"(?:\((?P<first>\S+) and (?P<second>\S+)\)\. Fix: give each mesh axis one type\."
    r"|in \((?P<names>[\w, ]+)\)\. Fix: name each mesh axis once\.)$"
)
"""The one message shape: ``[where: ]axis tp is given twice (R@tp and V@tp). Fix: give each mesh axis one type.``,
or for plain names ``[where: ]axis tp is given twice in (tp, tp). Fix: name each mesh axis once.``."""


def _raised(call: Callable[[], Any]) -> DuplicateAxisError:
    with pytest.raises(DuplicateAxisError) as info:
        call()
    assert isinstance(info.value, ValueError)  # callers catching ValueError keep working
    assert isinstance(info.value, SpmdTypeError) and info.value.axis == "tp"
    return info.value


def _shape(message: str) -> re.Match[str]:
    match = SHAPE.match(message)
    assert match is not None, f"not the duplicate-axis message shape: {message!r}"
    assert match.group("axis") == "tp"
    return match


def _types(message: str) -> tuple[str, str]:
    """The two types a typed duplicate names, checked to be the shape's."""
    match = _shape(message)
    return match.group("first"), match.group("second")


# --------------------------------------------------------------------------
# Types per axis: the core, the text form, runtime annotations, the plugin
# --------------------------------------------------------------------------


def test_the_core_names_the_axis_both_types_and_the_fix() -> None:
    entries = [("tp", parse_axis_type("R")), ("dp", parse_axis_type("V")), ("tp", parse_axis_type("V"))]
    error = _raised(lambda: tensor_type_from(entries))
    assert str(error) == "axis tp is given twice (R@tp and V@tp). Fix: give each mesh axis one type."
    assert error.code is Code.ANNOTATION


def test_the_core_takes_where_and_code() -> None:
    entries = [("tp", parse_axis_type("P")), ("tp", parse_axis_type("R"))]
    error = _raised(lambda: tensor_type_from(entries, where="redistribute's src", code=Code.COLLECTIVE))
    assert _shape(str(error)).group("where") == "redistribute's src"
    assert error.code is Code.COLLECTIVE


def test_distinct_entries_build_the_type() -> None:
    built = tensor_type_from([("tp", parse_axis_type("R")), ("dp", parse_axis_type("V"))])
    assert built == TensorType.parse("V@dp, R@tp")
    assert distinct_axes(["dp", "tp"]) == ("dp", "tp")


@pytest.mark.parametrize(
    "text,types",
    [
        ("R@tp, V@tp", ("R@tp", "V@tp")),
        ("S(0)@(dp, tp), R@tp", ("S(0)@tp", "R@tp")),
        ("Pmax@tp,I@tp", ("Pmax@tp", "I@tp")),
    ],
)
def test_tensor_type_parse(text: str, types: tuple[str, str]) -> None:
    error = _raised(lambda: TensorType.parse(text))
    assert _types(str(error)) == types
    assert _shape(str(error)).group("where") == repr(text)


@pytest.mark.parametrize(
    "written,types",
    [
        ((R @ tp, V @ tp), ("R@tp", "V@tp")),
        ((S(0) @ (dp, tp), I @ tp), ("S(0)@tp", "I@tp")),
        ((S(1) @ (tp, tp),), ("S(1)@tp", "S(1)@tp")),
    ],
    ids=["R@tp,V@tp", "S(0)@(dp,tp),I@tp", "S(1)@(tp,tp)"],
)
def test_runtime_annotations(written: tuple[Any, ...], types: tuple[str, str]) -> None:
    """``spmd_stubs.types.tensor_type_of``: what to_local/from_local/placements_of read their types with."""
    error = _raised(lambda: tensor_type_of(written))
    assert _types(str(error)) == types
    assert _shape(str(error)).group("where") is None


def test_the_plugins_function_wraps_the_same_message() -> None:
    with pytest.raises(AnnotationError) as info:
        plugin_tensor_type_of([("tp", parse_axis_type("R")), ("tp", parse_axis_type("V"))])
    assert isinstance(info.value.__cause__, DuplicateAxisError)
    assert _types(str(info.value)) == ("R@tp", "V@tp")


CASE = """\
from spmd_stubs import I, R, S, Tensor, V
from spmd_stubs.axes import dp, tp

def headline(x: Tensor[R@tp, V@tp]) -> None: ...
def canonical(x: Tensor[R[tp], I[tp]]) -> None: ...
def group(x: Tensor[S(0)@(dp, tp), R@tp]) -> None: ...
"""


def test_the_plugin_reports_it_with_the_same_message(tmp_path: Path, kept_dir: Callable[[str], Path]) -> None:
    """Real mypy on a tiny file, sharing the plugin tests' cache (and their lock)."""
    cache_root = kept_dir("spmd_mypy")
    case, config = tmp_path / "case.py", tmp_path / "mypy.ini"
    case.write_text(CASE)
    config.write_text(config_text())
    with open(cache_root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        output = run_mypy([case], config, cache_root / "mypy_cache", tmp_path)
    prefix, code = "error: Bad SPMD annotation: ", "  [spmd-annotation]"
    headlines = {int(line.split(":")[1]): line.split(prefix, 1)[1].removesuffix(code)
                 for line in output.splitlines() if prefix in line and line.endswith(code)}
    # the error line says what is wrong; its fix follows as a note on the same line (mypy's shape)
    fixes = {int(line.split(":")[1]): line.split(": note: ", 1)[1]
             for line in output.splitlines() if ": note: Fix: " in line}
    found = {number: f"{headline}. {fixes.get(number, '')}" for number, headline in headlines.items()}
    assert {line: _types(message) for line, message in found.items()} == {
        4: ("R@tp", "V@tp"),
        5: ("R@tp", "I@tp"),
        6: ("S(0)@tp", "R@tp"),
    }, output


# --------------------------------------------------------------------------
# Plain axis names: mesh binding, the region decorators, out_partial_axes
# --------------------------------------------------------------------------


def test_the_core_names_list() -> None:
    error = _raised(lambda: distinct_axes(["tp", "dp", "tp"], where="here"))
    assert str(error) == "here: axis tp is given twice in (tp, dp, tp). Fix: name each mesh axis once."


@pytest.mark.parametrize("resolve", [group_of, group_and_size], ids=["group_of", "group_and_size"])
def test_a_flattened_axis_repeated(resolve: Callable[[Any], Any]) -> None:
    error = _raised(lambda: resolve((tp, tp)))
    assert _shape(str(error)).group("names") == "tp, tp"


@pytest.mark.parametrize("decorator", [global_spmd, local_map], ids=["global_spmd", "local_map"])
@pytest.mark.parametrize("axes", [(tp, tp), ((tp, tp),), (tp, (dp, tp))], ids=["tp,tp", "(tp,tp)", "tp,(dp,tp)"])
def test_region_decorators(decorator: Callable[..., Any], axes: tuple[Any, ...]) -> None:
    error = _raised(lambda: decorator(*axes))
    assert _shape(str(error)).group("where") == f"{decorator.__name__}(...)"


def test_out_partial_axes() -> None:
    x = torch.ones(2, 2)
    error = _raised(lambda: linear(x, x, out_partial_axes=(tp, tp)))
    assert _shape(str(error)).group("where") == "linear(..., out_partial_axes=...)"


def test_redistribute_specs() -> None:
    from spmd_stubs.core import planner

    entries = [("tp", parse_axis_type("S(0)")), ("tp", parse_axis_type("R"))]
    error = _raised(lambda: planner.spec_of_entries(entries, "src"))
    assert _shape(str(error)).group("where") == "redistribute's src"
    assert _types(str(error)) == ("S(0)@tp", "R@tp")
    assert error.code is Code.COLLECTIVE
