"""torch's tensor-parallel styles as SPMD types (spmd_stubs.core.parallel_styles), pure and fast.

Each expectation is read off torch's ``style.py``: what ``from_local`` assumes of a local input, what
``to_local()`` hands on, which placement each parameter gets; a Replicate crossing with DTensor's default
gradient placements is I (docs/dtensor.md).
"""

from __future__ import annotations

import pytest

from spmd_stubs.core import Invariant, Partial, Replicate, Shard, Varying
from spmd_stubs.core.parallel_styles import (
    REPLICATE,
    Handed,
    KeywordInput,
    KeywordLayouts,
    Placement,
    accepts,
    shard,
    style_types,
)


def test_colwise_linear_takes_the_whole_input_and_hands_on_its_columns() -> None:
    types = style_types("ColwiseParallel", {}, "linear")
    assert types.inputs == (Invariant,)
    assert types.output == Handed(shard(-1), dtensor=False)
    assert types.output.type == Shard(-1)
    assert dict(types.parameters) == {"weight": Shard(0), "bias": Shard(0)}


def test_colwise_options_choose_the_input_and_output_layouts() -> None:
    types = style_types("ColwiseParallel", {"input_layouts": shard(1), "output_layouts": REPLICATE,
                                            "use_local_output": False}, "linear")
    assert types.inputs == (Shard(1),)
    assert types.output == Handed(REPLICATE, dtensor=True)
    assert types.output.shown("tp") == "a DTensor Replicate()"


def test_rowwise_linear_takes_a_last_dim_shard_and_hands_on_the_all_reduced_whole() -> None:
    types = style_types("RowwiseParallel", {}, "linear")
    assert types.inputs == (Shard(-1),)
    assert types.output is not None and types.output.type == Invariant
    assert dict(types.parameters) == {"weight": Shard(1), "bias": Invariant}
    scattered = style_types("RowwiseParallel", {"output_layouts": shard(1)}, "linear")
    assert scattered.output is not None and scattered.output.shown("tp") == "S(1)@tp"


def test_embeddings_shard_their_table_and_judge_no_token_ids() -> None:
    assert dict(style_types("ColwiseParallel", {}, "embedding").parameters) == {"weight": Shard(1)}
    rowwise = style_types("RowwiseParallel", {"input_layouts": REPLICATE, "output_layouts": shard(1)}, "embedding")
    assert rowwise.inputs == (None,) and dict(rowwise.parameters) == {"weight": Shard(0)}


def test_sequence_parallel_takes_and_hands_on_a_sequence_shard_as_a_dtensor() -> None:
    types = style_types("SequenceParallel", {}, "other")
    assert types.inputs == (Shard(1),)
    assert types.output == Handed(shard(1), dtensor=True)
    assert dict(types.parameters) == {"weight": Invariant, "bias": Invariant}
    local = style_types("SequenceParallel", {"sequence_dim": 0, "use_local_output": True}, "other")
    assert local.inputs == (Shard(0),) and local.output == Handed(shard(0), dtensor=False)


def test_prepare_module_input_converts_the_declared_inputs_only() -> None:
    types = style_types("PrepareModuleInput", {"input_layouts": (shard(1), None),
                                               "desired_input_layouts": (REPLICATE, None)}, "other")
    assert types.inputs == (Shard(1), None)
    assert types.received == (Handed(REPLICATE, dtensor=True), None)
    assert types.redistributed == (True, False)
    assert types.output is None  # the module's own forward decides
    kept = style_types("PrepareModuleInput", {"input_layouts": shard(1), "desired_input_layouts": shard(1),
                                              "use_local_output": True}, "other")
    assert kept.received == (Handed(shard(1), dtensor=False),) and kept.redistributed == (False,)


def test_prepare_module_output_states_what_forward_returns_and_what_it_hands_on() -> None:
    types = style_types("PrepareModuleOutput", {"output_layouts": REPLICATE, "desired_output_layouts": shard(0)},
                        "other")
    assert types.returned == Invariant and types.output == Handed(shard(0), dtensor=False)


def test_prepare_module_input_converts_the_keyword_inputs_its_kwarg_layouts_name() -> None:
    """torch's ``_prepare_input_kwarg_fn``: a named keyword input is converted, any other passed on; the
    positional inputs are left alone where ``input_layouts`` is not given."""
    types = style_types("PrepareModuleInput", {
        "input_kwarg_layouts": KeywordLayouts((("hidden_states", shard(1)), ("scale", REPLICATE))),
        "desired_input_kwarg_layouts": KeywordLayouts((("hidden_states", REPLICATE), ("scale", REPLICATE))),
    }, "other")
    assert dict(types.keyword_inputs) == {
        "hidden_states": KeywordInput(Shard(1), Handed(REPLICATE, dtensor=True), redistributed=True),
        "scale": KeywordInput(Invariant, Handed(REPLICATE, dtensor=True), redistributed=False),
    }
    assert types.positional_count is None
    both = style_types("PrepareModuleInput", {
        "input_layouts": shard(1), "desired_input_layouts": REPLICATE,
        "input_kwarg_layouts": KeywordLayouts((("x", shard(0)),)),
        "desired_input_kwarg_layouts": KeywordLayouts((("x", REPLICATE),)), "use_local_output": True}, "other")
    assert both.positional_count == 1 and both.inputs == (Shard(1),)
    assert both.keyword_inputs["x"].received == Handed(REPLICATE, dtensor=False)
    # desired keyword layouts without input_kwarg_layouts: torch registers the hook without kwargs
    ignored = style_types("PrepareModuleInput", {"desired_input_kwarg_layouts": KeywordLayouts((("x", REPLICATE),))},
                          "other")
    assert dict(ignored.keyword_inputs) == {}


def test_prepare_module_input_output_prepares_the_inputs_then_the_output() -> None:
    """torchtitan's MoE entry: the sequence shard gathered to a local whole (``use_local_input``), the
    output a pending sum reduce-scattered back to the sequence shard."""
    types = style_types("PrepareModuleInputOutput", {
        "input_layouts": (shard(1),), "desired_input_layouts": (REPLICATE,), "use_local_input": True,
        "output_layouts": (Placement("Partial"),), "desired_output_layouts": (shard(1),)}, "other")
    assert types.inputs == (Shard(1),) and types.received == (Handed(REPLICATE, dtensor=False),)
    assert types.returned == Partial and types.output == Handed(shard(1), dtensor=False)
    kept = style_types("PrepareModuleInputOutput", {
        "input_layouts": shard(1), "desired_input_layouts": REPLICATE, "output_layouts": REPLICATE,
        "desired_output_layouts": REPLICATE, "use_local_output": False}, "other")
    assert kept.received == (Handed(REPLICATE, dtensor=True),)  # use_local_input defaults to False
    assert kept.output == Handed(REPLICATE, dtensor=True)


@pytest.mark.parametrize("style, options, module", [
    ("ColwiseParallel", {}, "other"),  # torch: only nn.Linear and nn.Embedding
    ("ColwiseParallel", {"sequence_dim": 1}, "linear"),
    ("PrepareModuleInput", {"input_layouts": (shard(1),)}, "other"),  # torch asserts the desired layouts
    ("PrepareModuleInput", {"input_layouts": (shard(1), None), "desired_input_layouts": (REPLICATE,)}, "other"),
    ("SequenceParallel", {"use_local_output": 1}, "other"),
    ("SequenceParallel", {}, "composite"),  # what its sub-modules make of the shard is not followed
    ("PrepareModuleInputOutput", {}, "other"),  # torch requires the output layouts
    ("PrepareModuleInputOutput", {"output_layouts": REPLICATE, "desired_output_layouts": REPLICATE,
                                  "use_local_input": None}, "other"),
    ("PrepareModuleOutput", {"output_layouts": (REPLICATE,), "desired_output_layouts": (REPLICATE, REPLICATE)},
     "other"),
    ("PrepareModuleInput", {"input_kwarg_layouts": KeywordLayouts((("x", shard(1)),))}, "other"),
    ("PrepareModuleInput", {"input_kwarg_layouts": shard(1), "desired_input_kwarg_layouts": shard(1)}, "other"),
])
def test_what_torch_refuses_or_is_not_modelled_raises(style: str, options: dict[str, object], module: str) -> None:
    with pytest.raises(ValueError):
        style_types(style, options, module)  # type: ignore[arg-type]


def test_placements_name_their_local_types() -> None:
    assert Placement("Partial").local_type == Partial
    assert str(shard(-1)) == "Shard(-1)" and str(REPLICATE) == "Replicate()"
    with pytest.raises(ValueError):
        Placement("Shard")


def test_a_local_tensor_is_accepted_only_with_the_kind_the_layout_names() -> None:
    assert not accepts(Invariant, Replicate)  # R's gradient would be counted once per rank
    assert not accepts(Invariant, Shard(-1))
    assert accepts(Shard(-1), Varying)
    assert not accepts(Shard(1), Shard(2))
    assert accepts(Shard(1), Shard(-1))  # one dim of a 2-D tensor
    assert not accepts(Shard(1), Shard(-1), strict=True)
