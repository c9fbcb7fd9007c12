"""The boundary of a global function: its declared partition specs, at calls and returns."""
import torch

import spmd_stubs as spmd
from spmd_stubs import R, S, Tensor, V
from spmd_stubs.axes import dp, tp


@spmd.global_spmd(tp)
def rows(x: Tensor[S(0)@tp]) -> Tensor[S(0)@tp]:
    return x * 2.0


@spmd.global_spmd(dp, tp)
def grouped(x: Tensor[S(0)@(dp, tp)]) -> Tensor[S(0)@(dp, tp)]:
    return x + 1.0


@spmd.global_spmd(dp, tp)
def canonical(x: Tensor[S[0, dp, tp]]) -> Tensor[S[0, dp, tp]]:
    reveal_type(x)  # N: Tensor[S(0)@(dp,tp)]
    return x


def callers(
    a: Tensor[S(0)@tp], b: Tensor[S(1)@tp], v: Tensor[V@tp], g: Tensor[S(0)@(dp, tp)], h: Tensor[S(0)@(tp, dp)], r: Tensor[R@tp]
) -> None:
    reveal_type(rows(a))  # N: Tensor[S(0)@tp]
    rows(b)  # E: spmd-shard-mismatch parameter x of rows is declared S(0)@tp but gets S(1)@tp
    rows(v)  # entering global SPMD: the declared spec says how V's pieces make up the global tensor
    rows(r)  # E: arg-type
    reveal_type(grouped(g))  # N: Tensor[S(0)@(dp,tp)]
    grouped(h)  # E: spmd-shard-mismatch redistribute # E: spmd-shard-mismatch redistribute
    canonical(g)
    canonical(h)  # E: spmd-shard-mismatch (order 1) # E: spmd-shard-mismatch (order 0)


@spmd.global_spmd(tp)
def returns_wrong_split(x: Tensor[S(0)@tp]) -> Tensor[S(1)@tp]:
    return x  # E: spmd-shard-mismatch the return value of returns_wrong_split is declared S(1)@tp but gets S(0)@tp


@spmd.global_spmd(dp, tp)
def returns_wrong_order(x: Tensor[S(0)@(dp, tp)]) -> Tensor[S(0)@(tp, dp)]:
    return x  # E: spmd-shard-mismatch # E: spmd-shard-mismatch


def local_function(x: Tensor[S(0)@tp]) -> Tensor[S(1)@tp]:
    return x  # local SPMD: S(0) and S(1) are both V


def takes_varying(x: Tensor[V@tp]) -> Tensor[V@tp]:
    return x


@spmd.global_spmd(tp)
def forgetting_the_spec(x: Tensor[S(0)@tp]) -> None:
    y = takes_varying(x)  # passing S(0) where V is declared: forgetting the spec is well-typed
    reveal_type(y)  # N: Tensor[V@tp]
    y * 2.0  # E: spmd-shard-mismatch annotate how its pieces make up the global tensor


def not_on_tp(x: Tensor[R@dp]) -> Tensor[R@dp]:
    return x


@spmd.global_spmd(tp)
def passes_through_a_local_function(x: Tensor[S(0)@tp, R@dp]) -> None:
    # not_on_tp never names tp, so nothing says its result keeps the split: V@tp comes back.
    reveal_type(not_on_tp(x))  # N: Tensor[R@dp, V@tp]
    reveal_type(not_on_tp(x) if False else x)  # N: Tensor[R@dp, S(0)@tp]


def local_caller_passes_through(x: Tensor[S(0)@tp, R@dp]) -> None:
    reveal_type(not_on_tp(x))  # N: Tensor[R@dp, S(0)@tp]


@spmd.global_spmd(tp)
def returns_from_ops(x: Tensor[S(0)@tp]) -> Tensor[S(1)@tp]:
    if x.dim() > 2:
        return x.transpose(0, 1)
    if x.dim() > 1:
        return x * 2.0  # E: spmd-shard-mismatch the return value of returns_from_ops is declared S(1)@tp but gets S(0)@tp
    if x.dim() > 0:
        return spmd.all_to_all(x, tp, src=S(0), dst=S(2))  # E: spmd-shard-mismatch all_to_all(x, tp, src=S(2), dst=S(1))
    if x.dim() > 3:
        return rows(x)  # E: spmd-shard-mismatch gets S(0)@tp
    y = x + 1.0
    y = y.transpose(0, 1)
    return y


@spmd.global_spmd(tp)
def returns_a_name(x: Tensor[S(0)@tp]) -> Tensor[S(1)@tp]:
    y = x.transpose(0, 1)
    y = y.transpose(0, 1)  # E: spmd-shard-mismatch the return value of returns_a_name
    return y


@spmd.global_spmd(tp)
def returns_a_tuple(x: Tensor[S(0)@tp]) -> tuple[Tensor[S(0)@tp], Tensor[S(0)@tp]]:
    return x * 1.0, x.transpose(0, 1)  # E: spmd-shard-mismatch declared S(0)@tp but gets S(1)@tp


@spmd.global_spmd(tp)
def asserted(x: Tensor[S(0)@tp], v: Tensor[V@tp]) -> None:
    reveal_type(spmd.assert_type(x, S(0)@tp))  # N: Tensor[S(0)@tp]
    spmd.assert_type(x, S(1)@tp)  # E: spmd-shard-mismatch assert_type is declared S(1)@tp but gets S(0)@tp
    reveal_type(spmd.assert_type(v, S(1)@tp))  # N: Tensor[S(1)@tp]
    # An annotated assignment is checked by mypy, which reads S(i) as V: no shard check there.
    y: Tensor[S(1)@tp] = x
