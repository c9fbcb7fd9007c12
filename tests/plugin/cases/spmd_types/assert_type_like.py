"""``spmd.assert_type_like(out, x, overrides)`` asserts x's type on ``out`` with ``overrides`` set (its local
type alone for ``assert_local_type_like``); written as a statement, it narrows ``out``."""
from typing import Any

import torch
from torch.distributed import ProcessGroup

import spmd_types as spmd


def gathered_over_cp(x: torch.Tensor, out: torch.Tensor) -> None:
    spmd.assert_type(x, spmd.V, spmd.PartitionSpec("dp", "cp", None))
    spmd.assert_type_like(out, x, {"cp": spmd.R})
    reveal_type(out)  # N: Tensor[R@cp, S(0)@dp, V@tp]


def local_type_alone(x: torch.Tensor, out: torch.Tensor) -> None:
    spmd.assert_type(x, spmd.V, spmd.PartitionSpec("dp", "cp", None))
    spmd.assert_local_type_like(out, x)
    reveal_type(out)  # N: Tensor[V@cp, V@dp, V@tp]


def overridden_by_group(x: torch.Tensor, out: torch.Tensor, tp_group: ProcessGroup) -> None:
    spmd.assert_type(x, {"dp": spmd.V, "tp": spmd.V})
    spmd.assert_type_like(out, x, overrides={tp_group: spmd.I})
    reveal_type(out)  # N: Tensor[V@dp, I@tp]


def source_unknown(x: torch.Tensor, out: torch.Tensor) -> None:
    spmd.assert_type_like(out, x)
    reveal_type(out)  # N: Tensor[Any]


def overrides_unknown(x: torch.Tensor, out: torch.Tensor, overrides: dict[Any, Any]) -> None:
    spmd.assert_type(x, {"tp": spmd.V})
    spmd.assert_type_like(out, x, overrides)  # they may name any axis: nothing is asserted
    reveal_type(out)  # N: Tensor[Any]


def contradicts(x: torch.Tensor, out: torch.Tensor) -> None:
    spmd.assert_type(x, {"tp": spmd.I})
    spmd.assert_type(out, {"tp": spmd.R})
    spmd.assert_type_like(out, x)  # E: spmd-assert assert_type says I@tp but the value is R@tp on axis tp


def contradiction_resolved(x: torch.Tensor, out: torch.Tensor) -> None:
    spmd.assert_type(x, {"tp": spmd.I})
    spmd.assert_type(out, {"tp": spmd.R})
    spmd.assert_type_like(out, x, {"tp": spmd.R})
    reveal_type(out)  # N: Tensor[R@tp]


def partial_of_varying(partial: torch.Tensor, out: torch.Tensor) -> None:
    spmd.assert_type(partial, {"tp": spmd.P})
    spmd.assert_type(out, {"tp": spmd.V})
    spmd.assert_type_like(out, partial)  # E: spmd-runtime-rule spmd.assert_type_like says P@tp of a value that is V@tp on axis tp


def partial_of_varying_reinterpreted(partial: torch.Tensor, out: torch.Tensor) -> None:
    spmd.assert_type(partial, {"tp": spmd.P})
    spmd.assert_type(out, {"tp": spmd.V})
    out = spmd.reinterpret(out, "tp", src=spmd.V, dst=spmd.P)
    spmd.assert_type_like(out, partial)
    reveal_type(out)  # N: Tensor[P@tp]
