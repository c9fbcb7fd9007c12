"""A module written for spmd_types gets the op rules' fixes in spmd_types' spelling, which apply as written."""

import spmd_types as spmd
import torch
import torch.nn.functional as F


def lm_head(h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    spmd.assert_type(h, {"dp": spmd.S(0), "tp": spmd.I})
    spmd.assert_type(w, {"dp": spmd.R, "tp": spmd.S(0)})
    logits = F.linear(h, w)  # E: spmd-invariant-mix if the output should vary per rank, spmd.convert(x, "tp", src=spmd.I, dst=spmd.R) on the Invariant operand before linear.
    return logits


def lm_head_fixed(h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    spmd.assert_type(h, {"dp": spmd.S(0), "tp": spmd.I})
    spmd.assert_type(w, {"dp": spmd.R, "tp": spmd.S(0)})
    h = spmd.convert(h, "tp", src=spmd.I, dst=spmd.R)
    logits = F.linear(h, w)
    reveal_type(logits)  # N: Tensor[V@dp, V@tp]
    return logits
