"""Strict mode: every place a typed value's SPMD type is lost is spmd-untyped-boundary, named by its kind."""
from typing import Any, overload

import torch
import torch.nn.functional as F
from flash_attn import flash_attn_func  # type: ignore[import-not-found]
import triton_kernels  # type: ignore[import-not-found]

from spmd_stubs import Group, I, P, R, S, Tensor, V, all_reduce, convert
from spmd_stubs.axes import tp


class RMSNorm(torch.nn.Module):
    """Megatron's shape: an unannotated private helper."""

    weight: Tensor[I@tp]

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    def forward(self, x: Tensor[S(0)@tp]) -> Tensor[S(0)@tp]:
        return self._norm(x) * self.weight  # E: spmd-untyped-boundary `_norm` takes Tensor[S(0)@tp] as `x`, lost at an unannotated parameter In `self._norm(x)`: `_norm` has no annotations, so its result is unknown as well


def plain_helper(x: torch.Tensor, w: Tensor[S(0)@tp]) -> Tensor[V@tp]:
    return x @ w.T


def calls_the_plain_helper(x: Tensor[I@tp], w: Tensor[S(0)@tp]) -> None:
    plain_helper(x, w)  # E: spmd-untyped-boundary `plain_helper` takes Tensor[I@tp] as `x`, lost at a parameter typed plain torch.Tensor


def kernels(q: Tensor[S(1)@tp], k: Tensor[S(1)@tp], x: Tensor[R@tp]) -> None:
    flash_attn_func(q, k, 1.0)  # E: spmd-untyped-boundary `flash_attn_func` takes Tensor[S(1)@tp], Tensor[S(1)@tp], lost at an untyped third-party call
    triton_kernels.layer_norm_fn(x)  # E: spmd-untyped-boundary `triton_kernels.layer_norm_fn` takes Tensor[R@tp], lost at an untyped third-party call
    flash_attn_func(1.0)


def plain_return(x: Tensor[V@tp]) -> torch.Tensor:
    return F.relu(x)  # E: spmd-untyped-boundary `plain_return` returns Tensor[V@tp], lost at a return typed plain torch.Tensor


def unannotated_return(x: Tensor[V@tp]):  # type: ignore[no-untyped-def]
    return F.relu(x)  # E: spmd-untyped-boundary `unannotated_return` returns Tensor[V@tp], lost at an unannotated return In `F.relu(x)`: its callers get no SPMD type. Fix (needs your choice): annotate the return `-> Tensor[V@tp]`.


class Untyped(torch.nn.Module):
    def forward(self, x):
        return x


def modules(x: Tensor[V@tp]) -> None:
    Untyped()(x)  # E: spmd-untyped-boundary `Untyped` takes Tensor[V@tp], lost at a module with an unannotated forward


def size_tested(x: Tensor[V@tp], group: Group[tp]) -> Tensor[V@tp]:
    """A return wrapped for the size test (docs/spec.md#axes-of-size-1) keeps its declared type: no report."""
    if group.size() == 1:
        return x
    return x * 2


def size_tested_plain(x: Tensor[V@tp], group: Group[tp]) -> torch.Tensor:
    if group.size() == 1:
        return x  # E: spmd-untyped-boundary lost at a return typed plain torch.Tensor
    return x * 2  # E: spmd-untyped-boundary lost at a return typed plain torch.Tensor


class Norm(torch.nn.Module):
    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        return x


class UncheckedConstructor(torch.nn.Module):
    """picotron's DecoderLayer: an unannotated __init__ is not checked, so its attributes are Any."""

    def __init__(self, config):  # type: ignore[no-untyped-def]
        super().__init__()
        self.norm = Norm()

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        return self.norm(x)  # E: spmd-untyped-boundary `UncheckedConstructor.__init__`, which assigns it, has no annotations


class CheckedConstructor(torch.nn.Module):
    def __init__(self, config) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.norm = Norm()

    def forward(self, x: Tensor[I@tp]) -> Tensor[I@tp]:
        return self.norm(x)


def explicit_any(x: Any) -> Any:
    return x


def fully_typed(x: Tensor[P@tp], w: Tensor[S(0)@tp]) -> Tensor[R@tp]:
    """No boundary: every value keeps its type (and an explicit Any is the user's choice)."""
    explicit_any(x)
    y = all_reduce(x, tp, src=P, dst=R)
    z = plain_tensor_returned_untyped(torch.ones(3))
    return y


def plain_tensor_returned_untyped(x: torch.Tensor) -> torch.Tensor:
    return x * 2


class Cache(torch.nn.Module):
    """Variables and attributes declared plain torch.Tensor forget what is assigned to them."""

    hidden: torch.Tensor
    kept: Tensor[V@tp]

    def forward(self, x: Tensor[V@tp]) -> None:
        out: torch.Tensor = F.relu(x)  # E: spmd-untyped-boundary `out` is declared with a plain torch.Tensor type: the Tensor[V@tp] assigned to it is lost at a variable typed plain torch.Tensor
        self.hidden = x  # E: spmd-untyped-boundary `self.hidden` is declared with a plain torch.Tensor type: the Tensor[V@tp] assigned to it is lost at a variable typed plain torch.Tensor
        self.kept = x
        plain: torch.Tensor = torch.ones(3)


def make_kernel():  # type: ignore[no-untyped-def]
    return None


class Attention(torch.nn.Module):
    """Kernels kept in attributes and variables: Any from an unresolved import, or inferred from an untyped call."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = flash_attn_func
        self.kernel = make_kernel()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, q: Tensor[S(1)@tp], explicit: Any) -> None:
        self.attn(q)  # E: spmd-untyped-boundary `self.attn` takes Tensor[S(1)@tp], lost at an untyped third-party call
        self.kernel(q)  # E: spmd-untyped-boundary `self.kernel` takes Tensor[S(1)@tp], lost at a call of an untyped value In `self.kernel(q)`: mypy infers it Any
        self.proj(q)  # E: spmd-untyped-boundary `nn.Linear`'s `weight`, `bias` have no SPMD type on axis tp
        explicit(q)
        kernel = flash_attn_func
        kernel(q)  # E: spmd-untyped-boundary `kernel` takes Tensor[S(1)@tp], lost at an untyped third-party call


@overload
def overloaded(x: Tensor[V@tp]) -> Tensor[V@tp]: ...
@overload
def overloaded(x: int) -> int: ...
def overloaded(x: Tensor[V@tp] | int) -> torch.Tensor | int:
    """Callers see the items' returns, so the implementation's plain one loses nothing; its body is checked."""
    if isinstance(x, int):
        return x
    y: torch.Tensor = F.relu(x)  # E: spmd-untyped-boundary `y` is declared with a plain torch.Tensor type
    return F.relu(x)
