"""Sharded[Literal[0], tp], the shard spelling every type checker reads, is S(0)@tp."""
from typing import Literal

import typing_extensions

from spmd_stubs import R, S, Sharded, Tensor, V
from spmd_stubs import Sharded as Split
from spmd_stubs.axes import dp, tp

Rows = Tensor[Sharded[Literal[0], tp]]


def portable(x: Rows, y: Tensor[Sharded[Literal[-1], dp, tp], R[tp]], z: Tensor[Sharded[typing_extensions.Literal[1], dp]]) -> None:  # E: spmd-annotation axis tp is given twice
    reveal_type(x)  # N: Tensor[S(0)@tp]
    reveal_type(z)  # N: Tensor[S(1)@dp]


def same_as_the_at_form(x: Tensor[S(-1)@(dp, tp), V@tp]) -> Tensor[Sharded[Literal[-1], dp, tp]]:  # E: spmd-annotation axis tp is given twice
    return x


def same_as_the_canonical_form(x: Tensor[S[-1, dp, tp]]) -> Tensor[Sharded[Literal[-1], dp, tp]]:
    return x


def still_a_shard(x: Tensor[Sharded[Literal[0], tp]]) -> Tensor[R@tp]:
    return x  # E: return-value


def no_dim(x: Tensor[Sharded[tp]]) -> None: ...  # E: spmd-annotation Sharded needs the sharded tensor dim, e.g. Sharded[Literal[0], tp]


def not_an_int(x: Tensor[Sharded[Literal["0"], tp]]) -> None: ...  # E: spmd-annotation Sharded takes an int tensor dim


def imported_under_another_name(x: Tensor[Split[tp]]) -> None: ...  # E: spmd-annotation 'Split' Sharded needs the sharded tensor dim
