"""Without ``[spmd_mypy] current_mesh`` a bare spmd_types type names no axis: it is unknown, never guessed."""
import torch

import spmd_types as spmd


def bare_only(rope_cache: torch.Tensor) -> None:
    spmd.assert_type(rope_cache, spmd.R)
    reveal_type(rope_cache)  # N: Tensor[Any]


def bare_beside_a_dict(x_: torch.Tensor) -> None:
    spmd.assert_type(x_, spmd.V, {"tp": spmd.S(2)})
    reveal_type(x_)  # N: Tensor[S(2)@tp]
