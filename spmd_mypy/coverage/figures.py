"""How many of a scope's tensor-valued expressions have a known SPMD type.

An expression is *tensor-valued* when its type in mypy's type map is a
``torch.Tensor`` (a subclass such as ``nn.Parameter`` included), or a union
of them, ``None`` allowed beside them (``Tensor[R@tp] | None``).  It is
*known* when every tensor member has an SPMD type
(:func:`~spmd_mypy.representation.spmd_of`).  An expression without a type
in the map (the body of a function mypy does not check: an unannotated
function without ``check_untyped_defs``; unreachable code) or of another
type (``Any`` above all: an untyped call's result) is not counted.

>>> Figures(expressions=4, known=3).share
0.75
>>> Figures().share is None
True
"""

from __future__ import annotations

from dataclasses import dataclass

from mypy.types import AnyType, NoneType, Type, get_proper_type

from spmd_mypy.representation import members, spmd_of, tensor_instance


@dataclass(frozen=True)
class Figures:
    """Counts of tensor-valued expressions: all of them, and those with a known SPMD type."""

    expressions: int = 0
    known: int = 0

    @property
    def unknown(self) -> int:
        return self.expressions - self.known

    @property
    def share(self) -> float | None:
        """known / expressions; None where nothing is tensor-valued."""
        return self.known / self.expressions if self.expressions else None

    def __add__(self, other: Figures) -> Figures:
        return Figures(self.expressions + other.expressions, self.known + other.known)

    def as_dict(self) -> dict[str, int | float | None]:
        share = self.share
        return {"expressions": self.expressions, "known": self.known,
                "share": None if share is None else round(share, 4)}


def is_tensor_valued(typ: Type) -> bool:
    """A tensor, or a union of tensors (and None)."""
    tensors = [m for m in members(typ) if not isinstance(m, NoneType)]
    return bool(tensors) and all(tensor_instance(m) is not None for m in tensors)


def is_known(typ: Type) -> bool:
    """Every tensor member of a tensor-valued type has an SPMD type."""
    return all(spmd_of(m) is not None for m in members(typ) if not isinstance(m, NoneType))


def is_any(typ: Type) -> bool:
    return isinstance(get_proper_type(typ), AnyType)


def without_spmd_type(typ: Type | None) -> bool:
    """A value that carries no SPMD type: a tensor-valued one not known, or ``Any``."""
    if typ is None:
        return False
    return is_any(typ) or (is_tensor_valued(typ) and not is_known(typ))
