"""A bare ``torch.Tensor`` annotation is complete under --strict's disallow_any_generics, as without the plugin."""
import torch


def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor


def pair(x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    return x, [x]
