"""Plain torch.Tensor, nn.Parameter and untyped results are unknown: compatible both ways."""
import torch
from torch import nn

from spmd_stubs import P, R, S, Tensor, V
from spmd_stubs.axes import dp, tp


def takes_plain(x: torch.Tensor) -> torch.Tensor:
    return x


def takes_typed(x: Tensor[R@tp]) -> Tensor[R@tp]:
    return x


class Layer(nn.Module):
    weight: Tensor[S(0)@tp]

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(4, 4))


def both_ways(typed: Tensor[P@tp], plain: torch.Tensor, param: nn.Parameter) -> None:
    reveal_type(takes_plain(typed))  # N: Tensor[Any]
    reveal_type(takes_typed(plain))  # N: Tensor[R@tp]
    reveal_type(takes_typed(param))  # N: Tensor[R@tp]
    reveal_type(param * 2)  # N: Tensor[Any]
    x: Tensor[V@dp] = plain
    y: torch.Tensor = typed
    takes_typed(typed)  # E: arg-type "Tensor[P@tp]"; expected "Tensor[R@tp]"
