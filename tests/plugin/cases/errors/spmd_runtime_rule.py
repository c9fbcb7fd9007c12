"""spmd-runtime-rule: a spmd_types call that its run time accepts and the spec refuses (P asserted of a V value, a mutate_type that is not the spec's reinterpret, reinterpret(I,P)); the fix is the spec's call in spmd_types' spelling."""
import torch
import torch.nn.functional as F

import spmd_types as spmd


def wrong(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    spmd.assert_type(x, {"tp": spmd.S(1)})
    spmd.assert_type(w, {"tp": spmd.S(1)})
    out = F.linear(x, w)
    spmd.assert_type(out, {"tp": spmd.P})  # E: spmd-runtime-rule spmd.assert_type says P@tp of a value that is V@tp on axis tp
    return spmd.all_reduce(out, "tp", src=spmd.P, dst=spmd.R)


def fixed(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    spmd.assert_type(x, {"tp": spmd.S(1)})
    spmd.assert_type(w, {"tp": spmd.S(1)})
    out = spmd.reinterpret(F.linear(x, w), "tp", src=spmd.V, dst=spmd.P)
    spmd.assert_type(out, {"tp": spmd.P})
    return spmd.all_reduce(out, "tp", src=spmd.P, dst=spmd.R)
