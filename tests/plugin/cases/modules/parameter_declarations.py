"""A subclass of a torch module declares its parameters' SPMD types without clashing with torch's Parameter."""
from typing import Optional

import torch.nn.functional as F
from torch import nn

from spmd_stubs import R, S, Tensor, V
from spmd_stubs.axes import tp


class ColumnLinear(nn.Linear):
    weight: Tensor[S(0)@tp]
    bias: Optional[Tensor[S(0)@tp]]

    def forward(self, x: Tensor[R@tp]) -> Tensor[S(-1)@tp]:
        return F.linear(x, self.weight, self.bias)


class NotAParameter(nn.Linear):
    weight: int  # E: assignment base class "Linear" defined the type as "Tensor[Any]"


def reads(m: ColumnLinear) -> None:
    reveal_type(m.weight)  # N: Tensor[S(0)@tp]
    reveal_type(m.bias)  # N: Tensor[S(0)@tp] | None
    m.weight = nn.Parameter(m.weight)



class NoBias(nn.Linear):
    weight: Tensor[S(1)@tp]
    bias: None

    def forward(self, x: Tensor[S(-1)@tp]) -> Tensor[V@tp]:
        return F.linear(x, self.weight, self.bias)
