"""What --infer reads of a function: the same from a parsed definition and from one mypy loaded from its cache."""

from __future__ import annotations

from mypy import build  # noqa: F401  (mypy's modules import in this order only)
from mypy.nodes import ARG_OPT, ARG_POS, Argument, Block, FuncDef, NameExpr, Var

from spmd_mypy.migrate.infer_evidence import function_evidence


def _helper() -> FuncDef:
    """``def helper(x, bias=None): ...``, as mypy parses it."""
    none = NameExpr("None")
    none.fullname = "builtins.None"
    arguments = [Argument(Var("x"), None, None, ARG_POS), Argument(Var("bias"), None, none, ARG_OPT)]
    return FuncDef("helper", arguments, Block([]))


def test_a_parsed_definition() -> None:
    found = function_evidence(_helper(), "layers", "helper", "layers.py")
    assert found.untyped_params == ["x", "bias"]
    assert found.optional_params == {"bias"}


def test_a_definition_loaded_from_the_cache_has_no_arguments_and_is_read_all_the_same() -> None:
    """mypy's cache keeps argument names and kinds, not ``arguments`` (reading it raises AttributeError)."""
    cached = FuncDef.deserialize(_helper().serialize())
    assert not hasattr(cached, "arguments")
    found = function_evidence(cached, "layers", "helper", "layers.py")
    assert found.untyped_params == ["x", "bias"]
    assert found.optional_params == set()  # the default's value is not kept
