"""torch's tensor-parallel styles as SPMD types (spmd_stubs.core.parallel_styles), pure and fast.

Each expectation is read off torch's ``style.py``: what ``from_local`` assumes of a local input, what
``to_local()`` hands on, which placement each parameter gets; a Replicate crossing with DTensor's default
gradient placements is I (docs/dtensor.md).
"""

from __future__ import annotations

import pytest

from spmd_stubs.core import Invariant, Partial, Replicate, Shard, Varying
from spmd_stubs.core.parallel_styles import REPLICATE, Handed, Placement, accepts, shard, style_types


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


@pytest.mark.parametrize("style, options, module", [
    ("ColwiseParallel", {}, "other"),  # torch: only nn.Linear and nn.Embedding
    ("ColwiseParallel", {"sequence_dim": 1}, "linear"),
    ("PrepareModuleInput", {"input_layouts": (shard(1),)}, "other"),  # torch asserts the desired layouts
    ("PrepareModuleInput", {"input_layouts": (shard(1), None), "desired_input_layouts": (REPLICATE,)}, "other"),
    ("SequenceParallel", {"use_local_output": 1}, "other"),
    ("PrepareModuleInputOutput", {}, "other"),
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
