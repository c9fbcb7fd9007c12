"""The op records (spmd_stubs.core.torch_ops): one record per op, and the lookups derived from them."""

from __future__ import annotations

import pytest

from spmd_stubs.core import Apply, Arg, Linearity, Monotone, torch_ops
from spmd_stubs.core.sharding import (
    Along,
    Einsum,
    Flatten,
    Matmul,
    Pointwise,
    Reduce,
    SpmdForm,
    Squeeze,
    Transpose,
    View,
)
from spmd_stubs.core.torch_ops import OPS, REQUIRED, TENSOR_ATTRIBUTES, NoRule, Op, Variadic, lookup, out_of_place

SELECT, ADDITIVE = Linearity.SELECT, Linearity.ADDITIVE


def test_every_spelling_answers_to_one_record() -> None:
    spellings = [name for record in torch_ops.RECORDS for name in record.names]
    assert len(spellings) == len(set(spellings)) == len(OPS) + len(TENSOR_ATTRIBUTES)
    assert OPS["__add__"] is OPS["add"] is OPS["__radd__"]
    assert set(TENSOR_ATTRIBUTES) == {"T", "H", "mT", "mH", "data"}
    assert not set(TENSOR_ATTRIBUTES) & set(OPS)


def test_in_place_spellings_answer_to_the_out_of_place_record() -> None:
    assert out_of_place("add_") == ("add", True)
    assert out_of_place("__iadd__") == ("__add__", True)
    assert out_of_place("add") == ("add", False)
    assert out_of_place("requires_grad_") == ("requires_grad_", False)
    assert lookup("mul_") is OPS["mul"]
    assert lookup("T") is None and lookup("no_such_op") is None


def test_ops_that_apply_a_python_function_stay_unmodelled() -> None:
    """apply_, map_ and map2_ give whatever a Python function makes of each element, which no rule over the
    operands' types can follow; the tests take map_ as the op nobody models (spmd-unmodelled)."""
    assert [lookup(name) for name in ("apply_", "map_", "map2_")] == [None, None, None]


def test_the_bias_is_a_term_added_to_a_product() -> None:
    """The rules' fixes for a row-parallel product and spmd.linear's check read an op's bias from its record."""
    with_bias = {name: record for name, record in OPS.items() if record.bias is not None}
    assert set(with_bias) == {"linear", "bilinear", "addmm", "addbmm", "baddbmm", "addmv"}
    for record in with_bias.values():
        assert isinstance(record.rule, Apply) and record.rule.linearity is ADDITIVE
        assert Arg(record.bias) in record.rule.operands


def test_selections_derive_from_the_operands_without_gradient() -> None:
    assert OPS["gather"].rule == Apply(SELECT, Arg(2), Arg(0))
    assert OPS["__getitem__"].rule == Apply(SELECT, Arg(1), Arg(0))
    assert OPS["where"].rule == Apply(SELECT, Arg(0), Apply(ADDITIVE, Arg(1), Arg(2)))
    assert OPS["embedding"].rule == Apply(SELECT, Arg(0), Arg(1))
    assert OPS["add"].rule is OPS["add"].linearity
    with pytest.raises(TypeError, match="no fixed positions"):
        Op(("bad",), Variadic(ADDITIVE), no_grad=(0,))


def test_results_without_gradient_are_a_fact_of_their_records() -> None:
    gradient_free = torch_ops.GRADIENT_FREE_RESULTS
    indices = {"argmax", "argmin", "argsort", "nonzero", "searchsorted", "bucketize", "one_hot"}
    bools = {"eq", "__lt__", "greater_equal", "isclose", "isneginf", "isposinf", "logical_not", "bitwise_xor", "any"}
    samples = {"randint", "randint_like", "randperm", "multinomial", "bernoulli"}
    assert indices | bools | samples | {"long", "bool", "int", "detach"} <= gradient_free
    assert not {"sort", "topk", "max", "clone", "float", "to", "dropout", "where", "gather"} & gradient_free
    assert all(not OPS[name].result_has_gradient for name in gradient_free)
    record = lookup("bernoulli_")
    assert record is not None and not record.result_has_gradient


def test_samplers_and_index_producers_are_nonlinear() -> None:
    for name in ("multinomial", "bernoulli", "searchsorted", "bucketize", "isposinf", "randint", "randperm"):
        assert OPS[name].rule == Variadic(Linearity.NONLINEAR), name
    # Only the shape of randint_like's input matters: its values reach no operand.
    assert OPS["randint_like"].rule == Variadic(Linearity.NONLINEAR, start=1)


def test_ops_found_in_nanotron_and_picotron() -> None:
    assert OPS["logsigmoid"] is OPS["log_sigmoid"] and OPS["logsigmoid"].effect is Monotone.INCREASING
    assert OPS["fill"].rule == Arg(1)
    assert lookup("fill_") is OPS["fill"]
    scores = Apply(Linearity.NONLINEAR, Arg(0), Arg(1))
    assert OPS["flex_attention"].rule == Apply(Linearity.MULTILINEAR, scores, Arg(2))
    assert build("flex_attention") == build("scaled_dot_product_attention")


def test_the_spmd_ops_are_the_forms_the_records_name() -> None:
    assert torch_ops.SPMD_OPS == {"einsum", "matmul", "linear", "sum", "amax", "amin"}
    assert all(name in OPS for name in torch_ops.SPMD_OPS)
    assert OPS["amax"].partial == "max" and OPS["amax"].effect is Monotone.MAX


def build(name: str, *values: torch_ops.Value) -> object:
    record = OPS.get(name) or TENSOR_ATTRIBUTES[name]
    assert record.shape is not None
    return record.shape.build(values, record)


def test_shape_rules_build_behaviours_from_the_call_values() -> None:
    assert build("add") == Pointwise()
    assert build("sum", (-1,), True) == Reduce((-1,), True, "sum", SpmdForm("sum"))
    assert build("argmax", -1, False) == Reduce((-1,), False, None, None)
    assert build("mm") == Matmul(("ij,jk->ik",), SpmdForm("matmul"))
    assert build("dot") == Matmul(("i,i->",), None)
    assert build("einsum", "ij,jk->ik") == Einsum("ij,jk->ik", torch_ops.OPS["einsum"].spmd)
    assert build("layer_norm", (4, 8)) == Along((-2, -1))
    assert build("rms_norm", 8) == Along((-1,))
    assert build("transpose", 0, -1) == Transpose(0, -1)
    assert build("T") == Transpose(0, 1, matrix=True)
    assert build("squeeze", None) == Squeeze(None)
    assert build("ravel", 0, -1) == Flatten()
    assert build("view", View(1, 0, 2)) == View(1, 0, 2)


def test_max_is_elementwise_where_the_call_passes_other() -> None:
    assert build("max", None, False, True) == Pointwise()
    assert build("max", 0, True, False) == Reduce((0,), True, None, SpmdForm("amax"))


def test_reflected_matmul_swaps_its_operands() -> None:
    shape = OPS["__rmatmul__"].shape
    assert shape is not None and shape.swap
    assert build("__rmatmul__") == build("matmul") == Matmul(None, SpmdForm("matmul"))


@pytest.mark.parametrize(
    ("name", "values", "why"),
    [
        ("softmax", (None,), "dim=None"),
        ("sum", (True, False), "a bool where dims were expected"),
        ("sum", ((), False), "an empty dim list"),
        ("unsqueeze", (None,), "a dim that is not an int"),
    ],
)
def test_values_a_behaviour_cannot_take_give_no_rule(name: str, values: tuple[torch_ops.Value, ...], why: str) -> None:
    with pytest.raises(NoRule, match=why):
        build(name, *values)


def test_parameters_without_a_default_are_required() -> None:
    shape = OPS["softmax"].shape
    assert shape is not None
    [param] = shape.params
    assert (param.name, param.default) == ("dim", REQUIRED)
