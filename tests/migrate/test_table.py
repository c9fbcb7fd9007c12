"""The codemod's tables agree with the runtime: spmd_stubs.megatron's behaviour and torch's signatures."""

import inspect

import pytest
import torch.distributed

import spmd_stubs.megatron as typed_megatron
from spmd_mypy.migrate.raw import RAW_COLLECTIVES
from spmd_stubs import core
from spmd_stubs.core.megatron_table import HELPERS
from spmd_stubs.types import axis_name, to_axis_type


@pytest.fixture
def recorded(monkeypatch):
    """Replace the collectives spmd_stubs.megatron calls by recorders of (op, axis, src, dst)."""
    calls = []

    def recorder(op):
        def record(x, axis, *, src=None, dst, **kwargs):
            calls.append((op, axis_name(axis), to_axis_type(src), to_axis_type(dst)))
            return x
        return record

    for op in ("convert", "all_reduce", "all_gather", "reduce_scatter"):
        monkeypatch.setattr(typed_megatron, op, recorder(op))
    monkeypatch.setattr(typed_megatron, "_all_to_all", recorder("all_to_all"))
    return calls


def _expected(helper, dst):
    typed = helper.typed
    return [(typed.op, typed.axis, core.parse_axis_type(typed.src), core.parse_axis_type(dst))]


@pytest.mark.parametrize("name", sorted(n for n in HELPERS if hasattr(typed_megatron, n)))
def test_each_row_is_what_spmd_stubs_megatron_does(name, recorded):
    helper = HELPERS[name]
    getattr(typed_megatron, name)(input_="x", group=None)
    assert recorded == _expected(helper, helper.typed.dst)


def test_the_output_grad_switch_matches(recorded):
    helper = HELPERS["gather_from_sequence_parallel_region"]
    typed_megatron.gather_from_sequence_parallel_region("x", tensor_parallel_output_grad=False)
    assert recorded == _expected(helper, helper.dst_if_false)


def test_the_uneven_all_to_all_matches(recorded):
    helper = HELPERS["all_to_all"]
    typed_megatron.all_to_all(None, "x", [1, 2], [2, 1])
    uneven = helper.uneven
    assert uneven is not None
    assert recorded == [(uneven.op, uneven.axis, core.parse_axis_type(uneven.src), core.parse_axis_type(uneven.dst))]


def test_every_megatron_helper_of_spmd_stubs_has_a_row():
    assert set(typed_megatron.__all__) <= set(HELPERS)


def test_fairscale_rows_equal_their_megatron_core_names():
    old_to_new = {"copy_to_model_parallel_region": "copy_to_tensor_model_parallel_region",
                  "reduce_from_model_parallel_region": "reduce_from_tensor_model_parallel_region",
                  "scatter_to_model_parallel_region": "scatter_to_tensor_model_parallel_region",
                  "gather_from_model_parallel_region": "gather_from_tensor_model_parallel_region"}
    for old, new in old_to_new.items():
        assert HELPERS[old].typed == HELPERS[new].typed


@pytest.mark.parametrize("module, package", [("megatron.core.tensor_parallel.mappings", "megatron"),
                                             ("fairscale.nn.model_parallel.mappings", "fairscale")])
def test_helper_parameters_are_the_real_ones(module, package):
    """Parameter names and order come from the installed megatron-core and fairscale."""
    import importlib
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        real = importlib.import_module(module)
    checked = 0
    for name, helper in HELPERS.items():
        function = getattr(real, name, None)
        if function is None:
            continue
        assert tuple(inspect.signature(function).parameters) == helper.param_names(), name
        checked += 1
    assert checked == (10 if package == "megatron" else 4)


@pytest.mark.parametrize("name", sorted(RAW_COLLECTIVES))
def test_raw_collective_parameters_are_torchs(name):
    function = getattr(torch.distributed, name.rpartition(".")[2])
    assert tuple(inspect.signature(function).parameters) == RAW_COLLECTIVES[name].params
