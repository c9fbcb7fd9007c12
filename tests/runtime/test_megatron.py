"""Each Megatron helper behaves exactly as its typed equivalent in ``spmd_stubs.core.megatron_table``.

The typed equivalents are the transitions of docs/spec.md#transitions.
"""

from __future__ import annotations

from typing import Callable

import pytest
import torch
from spmd_cases import Case, check
from spmd_world import GROUPS, SimWorld

import spmd_stubs as spmd
from spmd_stubs import core, megatron
from spmd_stubs.axes import ep, tp
from spmd_stubs.core import Shard

R, I, P = core.Replicate, core.Invariant, core.Partial  # noqa: E741 -- the spec's names

TABLE: list[tuple[str, Callable[[torch.Tensor], torch.Tensor], Case]] = [
    ("copy_to", megatron.copy_to_tensor_model_parallel_region, Case("convert", I, R)),
    ("reduce_from", megatron.reduce_from_tensor_model_parallel_region, Case("all_reduce", P, I)),
    ("scatter_to_tp", megatron.scatter_to_tensor_model_parallel_region, Case("convert", I, Shard(-1))),
    ("gather_from_tp", megatron.gather_from_tensor_model_parallel_region, Case("all_gather", Shard(-1), I)),
    ("scatter_to_sp", megatron.scatter_to_sequence_parallel_region, Case("convert", I, Shard(0))),
    ("gather_from_sp", megatron.gather_from_sequence_parallel_region, Case("all_gather", Shard(0), R)),
    (
        "gather_from_sp_no_output_grad",
        lambda x: megatron.gather_from_sequence_parallel_region(x, tensor_parallel_output_grad=False),
        Case("all_gather", Shard(0), I),
    ),
    ("reduce_scatter_to_sp", megatron.reduce_scatter_to_sequence_parallel_region, Case("reduce_scatter", P, Shard(0))),
    ("all_gather_last_dim", megatron.all_gather_last_dim_from_tensor_parallel_region, Case("all_gather", Shard(-1), R)),
    (
        "reduce_scatter_last_dim",
        megatron.reduce_scatter_last_dim_to_tensor_parallel_region,
        Case("reduce_scatter", P, Shard(-1)),
    ),
]


@pytest.mark.parametrize("helper,case", [(h, c) for _, h, c in TABLE], ids=[n for n, _, _ in TABLE])
def test_helper_is_its_typed_equivalent(sim: SimWorld, helper: Callable[[torch.Tensor], torch.Tensor], case: Case) -> None:
    check(sim, case, tp, GROUPS["tp"], fn=helper)


def test_all_to_all_exchanges_dim_0_chunks_on_ep(sim: SimWorld, fake_mesh) -> None:  # type: ignore[no-untyped-def]
    spmd.bind_groups({ep: fake_mesh.get_group("tp")})
    case = Case("all_to_all", Shard(0), Shard(0))
    check(sim, case, ep, GROUPS["tp"], fn=lambda x: megatron.all_to_all(None, x))


def test_helpers_annotations_erase_to_tensor() -> None:
    import typing

    for name in megatron.__all__:
        hints = typing.get_type_hints(getattr(megatron, name))
        assert hints["return"] in (torch.Tensor, typing.Union[torch.Tensor, torch.Tensor]), name
