"""``no_typecheck()`` blocks (and the bodies of functions decorated ``@no_typecheck``) are quiet and not trusted
after; ``local()`` blocks and ``is_type_checking()`` guards are checked as any other code."""
import torch
import torch.nn.functional as F

import spmd_types as spmd


def unchecked_metrics(pred: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    spmd.assert_type(pred, {"tp": spmd.P})
    spmd.assert_type(labels, {"tp": spmd.R})
    with spmd.no_typecheck():
        loss = F.cross_entropy(pred, labels)  # no SPMD diagnostic here
        reveal_type(loss)  # N: Tensor[Any]
    reveal_type(loss)  # N: Tensor[Any]
    return loss


def unchecked_then_declared(pred: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    spmd.assert_type(pred, {"tp": spmd.P})
    is_type_checking = spmd.is_type_checking()
    with spmd.no_typecheck():
        loss = (pred * pred).sum()
        if is_type_checking:
            spmd.assert_type(loss, {"dp": spmd.P, "tp": spmd.I})
    reveal_type(loss)  # N: torch._tensor.Tensor[Any] | torch._tensor.Tensor[P@dp, I@tp]
    return loss


def checked_outside(pred: torch.Tensor) -> torch.Tensor:
    spmd.assert_type(pred, {"tp": spmd.P})
    with spmd.no_typecheck():
        print(pred.norm())
    return pred * pred  # E: spmd-partial-mul on axis tp


def local_block(q: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    spmd.assert_type(q, {"tp": spmd.P})
    spmd.assert_type(bias, {"tp": spmd.R})
    with spmd.local():
        return q + bias  # E: spmd-partial-affine on axis tp (P@tp + R@tp)


def guarded(x: torch.Tensor, use_spmd: bool) -> torch.Tensor:
    if use_spmd and spmd.is_type_checking():
        spmd.assert_type(x, {"tp": spmd.P})
        reveal_type(x)  # N: Tensor[P@tp]
    return torch.tanh(x)  # E: spmd-partial-nonlinear on axis tp


@spmd.no_typecheck()
def positions_bounded_unchecked(positions: torch.Tensor, max_valid_pos: int) -> None:
    """models/common/rope.py's bounds check: its body runs unchecked, so it reports no SPMD diagnostic."""
    spmd.assert_type(positions, {"tp": spmd.P})
    torch._assert_async(torch.all(torch.tanh(positions) <= max_valid_pos))


def positions_bounded(positions: torch.Tensor, max_valid_pos: int) -> None:
    spmd.assert_type(positions, {"tp": spmd.P})
    torch._assert_async(torch.all(torch.tanh(positions) <= max_valid_pos))  # E: spmd-partial-nonlinear on axis tp


@spmd.no_typecheck
def unchecked_without_parentheses(x: torch.Tensor) -> torch.Tensor:
    spmd.assert_type(x, {"tp": spmd.P})
    y = torch.tanh(x)
    reveal_type(y)  # N: Tensor[Any]
    return y


@spmd.register_no_typecheck
def unchecked_when_running(x: torch.Tensor) -> torch.Tensor:
    spmd.assert_type(x, {"tp": spmd.P})
    return torch.tanh(x)


@spmd.no_typecheck(out_types={"tp": spmd.R})
def typed_boundary(x: torch.Tensor) -> torch.Tensor:
    """A typed boundary is checked as written."""
    spmd.assert_type(x, {"tp": spmd.P})
    return torch.tanh(x)  # E: spmd-partial-nonlinear on axis tp
