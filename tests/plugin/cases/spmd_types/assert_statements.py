"""``spmd.assert_type(x, ...)`` as a statement narrows ``x``; spmd_types' relabel of V as P is refused."""
from dataclasses import dataclass

import torch
import torch.nn.functional as F

import spmd_types as spmd
from spmd_types import assert_local_type, assert_type


@dataclass
class VarlenMetadata:
    cu_seq_q: torch.Tensor


def narrows_in_place(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    spmd.assert_type(x, {"dp": spmd.S(0), "tp": spmd.R})
    assert_type(w, {"tp": spmd.S(0)})
    reveal_type(x)  # N: Tensor[S(0)@dp, R@tp]
    y = F.linear(x, w)
    reveal_type(y)  # N: Tensor[V@dp, V@tp]
    return y


def deprecated_spelling(h: torch.Tensor) -> None:
    assert_local_type(h, {"tp": spmd.I})
    reveal_type(h)  # N: Tensor[I@tp]


def in_a_loop(clip: torch.Tensor, timesteps: torch.Tensor) -> None:
    batch_type: dict[str, spmd.PerMeshAxisSpmdType] = {"dp": spmd.S(0), "tp": spmd.R}
    for tensor in (clip, timesteps):
        spmd.assert_type(tensor, batch_type)
        reveal_type(tensor)  # N: Tensor[S(0)@dp, R@tp]


ROPE_CACHE = torch.zeros(16)


def module_value_checked_not_narrowed() -> None:
    spmd.assert_type(ROPE_CACHE, {"tp": spmd.R})  # a global read here: assigning it would make it local
    reveal_type(ROPE_CACHE)  # N: Tensor[Any]


def attribute_checked_not_narrowed(metadata: VarlenMetadata) -> None:
    spmd.assert_type(metadata.cu_seq_q, {"dp": spmd.V, "tp": spmd.R})
    reveal_type(metadata.cu_seq_q)  # N: Tensor[Any]


def partial_sum_declared(x: torch.Tensor, w: torch.Tensor) -> None:
    spmd.assert_type(x, {"tp": spmd.S(1)})
    spmd.assert_type(w, {"tp": spmd.S(1)})
    out = F.linear(x, w)
    spmd.assert_type(out, {"tp": spmd.P})  # E: spmd-runtime-rule Fix (needs your choice): out = spmd.reinterpret(out, "tp", src=spmd.V, dst=spmd.P) before
    reveal_type(out)  # N: Tensor[P@tp]


def partial_sum_reinterpreted(x: torch.Tensor, w: torch.Tensor) -> None:
    spmd.assert_type(x, {"tp": spmd.S(1)})
    spmd.assert_type(w, {"tp": spmd.S(1)})
    out = spmd.reinterpret(F.linear(x, w), "tp", src=spmd.V, dst=spmd.P)
    spmd.assert_type(out, {"tp": spmd.P})
    reveal_type(out)  # N: Tensor[P@tp]


def contradicts(loss: torch.Tensor) -> None:
    spmd.assert_type(loss, {"dp": spmd.P, "tp": spmd.I})
    spmd.assert_type(loss, {"dp": spmd.R})  # E: spmd-assert correct the assertion, or first spmd.all_reduce(x, "dp", src=spmd.P, dst=spmd.R)


def reduced_first(loss: torch.Tensor) -> None:
    spmd.assert_type(loss, {"dp": spmd.P, "tp": spmd.I})
    loss = spmd.all_reduce(loss, "dp", src=spmd.P, dst=spmd.R)
    spmd.assert_type(loss, {"dp": spmd.R})
    reveal_type(loss)  # N: Tensor[R@dp, I@tp]
