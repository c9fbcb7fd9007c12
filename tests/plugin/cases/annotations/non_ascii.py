"""Lines with non-ASCII text before an annotation or a failing op: columns count characters.

mypy's columns on such lines are neither characters nor bytes (spmd_mypy/sources.py); the annotation
is read, the message quotes the right text, and the fix edit (tests/hints) replaces the right span.
"""
from spmd_stubs import I, P, R, S, Tensor
from spmd_stubs.axes import tp


def name_before(α: float, x: Tensor[P@tp]) -> None:
    reveal_type(x)  # N: Tensor[P@tp]


def name_after(x: Tensor[P@tp], α: float) -> None:
    reveal_type(x)  # N: Tensor[P@tp]


def string_before(tag: str = "é€😀", *, x: Tensor[R@tp]) -> None:
    reveal_type(x)  # N: Tensor[R@tp]


def wide_before(ééééé: int, x: Tensor[S(0)@tp]) -> None:
    reveal_type(x)  # N: Tensor[S(0)@tp]


def op_after(p: Tensor[P@tp], r: Tensor[I@tp]) -> Tensor[I@tp]:
    étiquette = "ünïcödé"; return p + r  # E: spmd-invariant-mix add mixes Invariant with Partial


def mul_after(p: Tensor[P@tp]) -> Tensor[P@tp]:
    naïve = "😀"; return p * p  # E: spmd-partial-mul In `p * p`
