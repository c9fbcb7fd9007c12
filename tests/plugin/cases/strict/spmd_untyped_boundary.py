"""spmd-untyped-boundary (strict only): a typed value flows into a place that forgets its SPMD type (an unannotated or plain torch.Tensor parameter or return, a module with an unannotated forward, untyped third-party code)."""
import torch

from spmd_stubs import S, Tensor, V
from spmd_stubs.axes import tp


class RMSNorm(torch.nn.Module):
    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    def wrong(self, x: Tensor[S(0)@tp]) -> torch.Tensor:
        return self._norm(x)  # E: spmd-untyped-boundary `_norm` takes Tensor[S(0)@tp] as `x`, lost at an unannotated parameter


def fixed(x: Tensor[S(0)@tp]) -> Tensor[V@tp]:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
