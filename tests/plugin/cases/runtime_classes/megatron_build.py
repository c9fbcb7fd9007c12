"""megatron-core: sub-modules built from a spec by ``build_module``, typed Any; ``modules`` declares their class."""
from typing import Any

import torch.nn.functional as F
from torch import nn

from spmd_stubs import I, Tensor
from spmd_stubs.axes import tp


def build_module(spec: Any, *args: Any, **kwargs: Any) -> Any:
    return spec(*args, **kwargs)


class MLP(nn.Module):
    def __init__(self, submodules: Any, hidden: int) -> None:
        super().__init__()
        self.linear_fc1 = build_module(submodules.linear_fc1, hidden, 4 * hidden)
        self.linear_fc2 = build_module(submodules.linear_fc2, 4 * hidden, hidden)

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        intermediate, _ = self.linear_fc1(x)
        reveal_type(intermediate)  # N: Tensor[S(-1)@tp]
        output, _ = self.linear_fc2(F.gelu(intermediate))
        return output


class SkippedColumn(MLP):
    """The hidden state fed to the row layer, which expects the column layer's split output."""

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        output, _ = self.linear_fc2(x)  # E: arg-type expected "Tensor[S(-1)@tp]"
        return output


class Experts(nn.Module):
    def __init__(self, submodules: Any, experts: int) -> None:
        super().__init__()
        self.local_experts = nn.ModuleList([build_module(submodules, 8) for _ in range(experts)])

    def forward(self, tokens: list[Tensor[I@tp]]) -> list[Tensor[I@tp]]:
        reveal_type(self.local_experts[0])  # N: MLP
        reveal_type(self.local_experts[1:])  # N: spmd_stubs.containers.ModuleListOf[plugin.cases.runtime_classes.megatron_build.MLP]
        return [expert(x) for expert, x in zip(self.local_experts, tokens)]
