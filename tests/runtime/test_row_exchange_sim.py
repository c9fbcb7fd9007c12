"""The uneven all-to-all in the simulated world: values, gradients, and its arguments' errors.

The counts each rank receives are ``SymInt``s whose value differs by rank,
as ``tolist()`` of a simulated tensor gives them: the exchange takes them
as they are.
"""

from __future__ import annotations

import pytest
import torch
from row_exchange import check_exchange
from spmd_world import GROUPS, SimWorld

import spmd_stubs as spmd
from spmd_stubs import R, S, V
from spmd_stubs.axes import dp, tp


def test_on_tp(sim: SimWorld) -> None:
    check_exchange(sim, tp, GROUPS["tp"])


def test_on_flattened_dp_tp(sim: SimWorld) -> None:
    check_exchange(sim, (dp, tp), GROUPS["dp_tp"])


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(src=S(0), dst=S(0), input_split_sizes=[1, 1], output_split_sizes=[1, 1]),
         ["all_to_all(src=S(0), dst=S(0)) with input_split_sizes=/output_split_sizes= does not exist on axis tp",
          "takes V@tp to V@tp", "pass src=V, dst=V, keeping the split sizes."]),
        (dict(src=V, dst=V, input_split_sizes=[1, 1]),
         ["got input_split_sizes= without output_split_sizes=", "Fix: pass both"]),
        (dict(src=V, dst=V, output_split_sizes=[1, 1]),
         ["got output_split_sizes= without input_split_sizes="]),
        (dict(src=V, dst=V, input_split_sizes=[1, 1, 0], output_split_sizes=[1, 1]),
         ["input_split_sizes=[1, 1, 0], which must give one non-negative row count per rank of axis tp (2 ranks)"]),
        (dict(src=V, dst=V, input_split_sizes=[3, -1], output_split_sizes=[1, 1]),
         ["input_split_sizes=[3, -1], which must give one non-negative"]),
        (dict(src=V, dst=V, input_split_sizes=[1, 2], output_split_sizes=[1, 1]),
         ["input_split_sizes=[1, 2], which send 3 rows of dim 0, but x has shape (2, 3) (2 rows)",
          "Fix: count input_split_sizes over x's own rows"]),
    ],
    ids=["shards", "no-output-sizes", "no-input-sizes", "one-per-rank", "negative", "rows-held"],
)
def test_its_arguments_are_checked(sim: SimWorld, kwargs: dict[str, object], words: list[str]) -> None:
    x = sim.make({rank: torch.ones(2, 3) for rank in range(4)})
    with pytest.raises(ValueError) as raised:
        spmd.all_to_all(x, tp, **kwargs)  # type: ignore[arg-type]
    for expected in words:
        assert expected in str(raised.value), (expected, str(raised.value))


def test_an_invalid_pair_is_the_algebras_error(sim: SimWorld) -> None:
    """An R input with src=R names the pair's error, before any size is looked at."""
    x = sim.make({rank: torch.ones(2, 3) for rank in range(4)})
    with pytest.raises(ValueError, match=r"all_to_all\(src=R, dst=V\) does not exist on axis tp"):
        spmd.all_to_all(x, tp, src=R, dst=V, input_split_sizes=[1, 1], output_split_sizes=[1, 1])


def test_even_exchange_is_unchanged(sim: SimWorld) -> None:
    """Without the sizes, all_to_all(V, V) still transposes the axis with dim 0."""
    x = sim.make({rank: torch.tensor([[10.0 * rank], [10.0 * rank + 1]]) for rank in range(4)})
    parts = sim.parts(spmd.all_to_all(x, tp, src=V, dst=V))
    assert parts[0].tolist() == [[0.0], [10.0]] and parts[1].tolist() == [[1.0], [11.0]], parts
