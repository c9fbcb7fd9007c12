"""An RMSNorm in Megatron's shape under sequence parallelism, ported as far as its boundary.

``forward`` is typed (its input is this rank's slice of the sequence), the
weight is the same on every tp rank; the private ``_norm`` helper is not
annotated.  The weight meets different tokens on each rank, so its gradient
needs an all-reduce over tp that nothing here performs (docs/bugs.md, the
sequence-parallel norm weight).
"""

import torch
from torch import nn

from spmd_stubs import I, S, Tensor
from spmd_stubs.axes import tp


class RMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        ones: Tensor[I@tp] = torch.ones(hidden_size)
        self.weight = nn.Parameter(ones)

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x: Tensor[S(0)@tp]) -> Tensor[S(0)@tp]:
        output = self._norm(x.float()).type_as(x)
        return output * self.weight
