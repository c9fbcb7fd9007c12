"""Shard propagation rules (spmd_stubs.core.sharding), one axis at a time, accepted and rejected.

Rejections name their code, the axis, the operand types and the fix.  A
randomised test checks the reduction rule against the dims of the local
result for every ndim, and one small concrete check the definition
``map(f, in_spec(x)) == out_spec(f(x))``.
"""

from __future__ import annotations

import random

import pytest

from spmd_stubs.core import (
    SCALAR,
    Code,
    Invariant,
    Partial,
    PartialOf,
    Replicate,
    Shard,
    SpmdTypeError,
    TensorType,
    Varying,
    sharding,
    torch_ops,
)
from spmd_stubs.core.sharding import (
    Along,
    Concat,
    Einsum,
    Flatten,
    Linear,
    Matmul,
    Movedim,
    Opaque,
    Permute,
    Pointwise,
    Reduce,
    Squeeze,
    Stack,
    Transpose,
    Unsqueeze,
    View,
    propagate,
)

S = Shard
R, I, V, P = Replicate, Invariant, Varying, Partial  # noqa: E741 -- the types' names


def run(behaviour, operands, partial=None, local=V, op="op"):
    return propagate(behaviour, operands, "tp", op, local, partial)


def rejects(behaviour, operands, code, *words, partial=None, op="op"):
    with pytest.raises(SpmdTypeError) as caught:
        run(behaviour, operands, partial, op=op)
    assert caught.value.code is code, caught.value.message
    assert caught.value.axis == "tp"
    for word in ("tp", "Fix", *words):
        assert word in caught.value.message, caught.value.message
    # A fix is a rewrite a tool applies, or said plainly to need a choice.
    assert ("Fix:" in caught.value.message) == (caught.value.fix is not None), caught.value.message
    return caught.value.message


# --------------------------------------------------------------------------
# Accepted: the output spec
# --------------------------------------------------------------------------

ACCEPTED = [
    # elementwise, broadcasting
    (Pointwise(), [S(0), R], None, S(0)),
    (Pointwise(), [S(-1), SCALAR], None, S(-1)),
    (Pointwise(), [S(1), S(1), I], None, S(1)),
    (Pointwise(), [S(0, 1), S(0, 1)], None, S(0, 1)),
    (Pointwise(), [S(0), None], None, S(0)),
    # matmul family, einsum
    (Matmul(), [S(0), R], None, S(0)),
    (Matmul(), [R, S(-1)], None, S(-1)),
    (Matmul(), [S(-1), S(-2)], "sum", P),
    (Matmul(), [S(-1), S(0)], "sum", P),
    (Matmul(("ij,jk->ik",)), [S(0), R], None, S(0)),
    (Matmul(("ij,jk->ik",)), [R, S(1)], None, S(1)),
    (Matmul(("bij,bjk->bik",)), [S(0), S(0)], None, S(0)),
    (Linear(), [R, S(0)], None, S(-1)),
    (Linear(), [R, S(0), S(0)], None, S(-1)),
    (Linear(), [S(0), R], None, S(0)),
    (Linear(), [S(-1), S(1)], "sum", P),
    (Linear(), [S(-1), S(-1)], "sum", P),
    (Einsum("bld,df->blf"), [R, S(1)], None, S(2)),
    (Einsum("bld,df->blf"), [R, S(-1)], None, S(-1)),
    (Einsum("blf,fd->bld"), [S(-1), S(0)], "sum", P),
    (Einsum("blf,fd->bld"), [S(0), R], None, S(0)),
    (Einsum("...f,fd->...d"), [S(0), R], None, S(0)),
    (Einsum("ij,jk"), [S(0), R], None, S(0)),  # implicit output 'ik'
    (Einsum("i,j->ij"), [R, S(0)], None, S(1)),
    # reductions
    (Reduce((-1,), False, "sum"), [S(-2)], None, S(-1)),
    (Reduce((-1,), True, "sum"), [S(-2)], None, S(-2)),
    (Reduce((1,), False, "sum"), [S(0)], None, S(0)),
    (Reduce((0,), False, "sum"), [S(1)], None, S(0)),
    (Reduce((0,), True, "sum"), [S(1)], None, S(1)),
    (Reduce((-1,), False, "sum"), [S(-1)], "sum", P),
    (Reduce(None, False, "sum"), [S(0)], "sum", P),
    (Reduce((-1,), False, "max"), [S(-1)], "max", PartialOf("max")),
    (Reduce((-1,), False, "min"), [S(-1)], "min", PartialOf("min")),
    # along a dim
    (Along((-1,)), [S(-2)], None, S(-2)),
    (Along((1,)), [S(0)], None, S(0)),
    # moving dims
    (Transpose(0, 1, matrix=True), [S(0)], None, S(-1)),
    (Transpose(0, 1, matrix=True), [S(-1)], None, S(-2)),
    (Transpose(-2, -1), [S(-1)], None, S(-2)),
    (Transpose(0, 1), [S(0)], None, S(1)),
    (Transpose(0, 1), [S(2)], None, S(2)),
    (Permute((1, 0, 2)), [S(0)], None, S(1)),
    (Permute((2, 0, 1)), [S(-1)], None, S(-3)),
    (Movedim((0,), (2,)), [S(0)], None, S(2)),
    (Unsqueeze(0), [S(0)], None, S(1)),
    (Unsqueeze(0), [S(-1)], None, S(-1)),
    (Unsqueeze(-1), [S(-1)], None, S(-2)),
    (Squeeze((1,)), [S(0)], None, S(0)),
    (Flatten(0, 1), [S(0)], None, S(0)),
    (Flatten(1, -1), [S(0)], None, S(0)),
    (Flatten(-2, -1), [S(-3)], None, S(-2)),
    (Concat(1), [S(0), S(0)], None, S(0)),
    (Concat(-1), [S(-2), S(-2), S(-2)], None, S(-2)),
    (Stack(0), [S(0), S(0)], None, S(1)),
    (Stack(-1), [S(-1), S(-1)], None, S(-2)),
    (View(prefix=1, ndim=3), [S(0)], None, S(0)),
    (View(suffix=1, ndim=2), [S(-1)], None, S(-1)),
    (View(suffix=1, ndim=2), [S(0)], None, S(0)),  # leading dims merge, the sharded one first
]


@pytest.mark.parametrize("behaviour, operands, partial, expected", ACCEPTED, ids=lambda v: str(v))
def test_accepted(behaviour, operands, partial, expected):
    assert run(behaviour, operands, partial) == expected


def test_no_sharded_operand_keeps_the_local_result():
    assert run(Pointwise(), [R, R], local=R) == R
    assert run(Matmul(), [P, R], local=P) == P
    assert run(Reduce((-1,), False, "sum"), [I], local=I) == I
    assert run(Opaque(), [R, None], local=R) == R


def test_unknown_operands_are_left_out():
    assert run(Pointwise(), [None, SCALAR], local=None) is None


# --------------------------------------------------------------------------
# Rejected
# --------------------------------------------------------------------------

def spmd_form(op):
    """The spmd.* form the op's record names in its fixes."""
    return torch_ops.OPS[op].spmd


CONTRACTIONS = [
    (Matmul(spmd=spmd_form("matmul")), [S(-1), S(0)], "matmul", "spmd.matmul(..., out_partial_axes=tp)"),
    (Matmul(("i,i->",)), [S(0), S(0)], "dot", "spmd.einsum(..., out_partial_axes=tp)"),
    (Linear(spmd_form("linear")), [S(-1), S(1)], "linear", "spmd.linear(..., out_partial_axes=tp)"),
    (Einsum("blf,fd->bld"), [S(2), S(0)], "einsum", "spmd.einsum(..., out_partial_axes=tp)"),
    (Reduce((-1,), False, "sum", spmd_form("sum")), [S(-1)], "sum", "spmd.sum(..., out_partial_axes=tp)"),
    (Reduce(None, False, "sum", spmd_form("sum")), [S(0)], "sum", "spmd.sum"),
    (Reduce((-1,), False, None, spmd_form("mean")), [S(-1)], "mean", "divided by the global size"),
    (Reduce((-1,), False, "max", spmd_form("amax")), [S(-1)], "amax", "spmd.amax(..., out_partial_axes=tp)"),
    (Reduce((-1,), False, None, spmd_form("max")), [S(-1)], "max", "spmd.amax(..., out_partial_axes=tp), or"),
    (Reduce((-1,), False, None), [S(-1)], "argmax", "all_gather(x, tp, src=S(-1), dst=R)"),
]


@pytest.mark.parametrize("behaviour, operands, op, fix", CONTRACTIONS, ids=lambda v: str(v))
def test_contraction_needs_out_partial_axes(behaviour, operands, op, fix):
    message = rejects(behaviour, operands, Code.SHARDED_CONTRACTION, fix, op=op)
    assert "never turns into a Partial implicitly" in message
    assert all(f"{o}@tp" in message for o in operands)


def test_out_partial_axes_where_nothing_sharded_is_contracted():
    rejects(Matmul(), [R, S(-1)], Code.SHARDED_CONTRACTION, "drop tp from out_partial_axes", partial="sum")
    rejects(Matmul(), [R, R], Code.SHARDED_CONTRACTION, "drop tp", partial="sum")
    rejects(Pointwise(), [S(0), R], Code.SHARDED_CONTRACTION, "drop tp", partial="sum")
    rejects(Reduce((-1,), False, "sum"), [S(0, None)], Code.SHARD_MISMATCH, "consistently", partial="sum")


def test_a_reduction_leaves_only_its_own_pending_kind():
    rejects(Reduce((-1,), False, "max"), [S(-1)], Code.SHARDED_CONTRACTION, "pending max", partial="sum")


MISMATCHES = [
    # operands split differently
    (Pointwise(), [S(0), S(1)], "all_to_all(y, tp, src=S(1), dst=S(0))"),
    (Pointwise(), [S(0, 0), S(0, 1)], "redistribute"),
    (Pointwise(), [S(0), S(-1)], "consistently"),
    (Pointwise(), [V, R], "S(i)@tp"),
    (Pointwise(), [V, S(0)], "local_map(tp)"),
    (Concat(1), [S(0), R], "convert(y, tp, src=R, dst=S(0))"),
    (Concat(0), [S(0), S(0)], "all_gather(x, tp, src=S(0), dst=R)"),
    (Concat(0), [S(-1), S(-1)], "consistently"),
    (Matmul(), [S(0), S(0)], "consistently"),  # batch dims, or a 1-D a contracting b's dim 0
    (Matmul(("ij,jk->ik",)), [S(0), S(0)], "all_to_all"),
    (Einsum("ij,jk->ik"), [S(0), S(1)], "all_to_all"),
    (Linear(), [R, S(0), R], "convert(w, tp, src=R, dst=S(0))"),
    (Linear(), [S(-1), R], "all_gather"),
    (Matmul(), [R, S(1)], "consistently"),
    (Matmul(), [S(-2), R], "consistently"),  # -2 is the last dim of the result when b is 1-D
    # acting along / reshaping the sharded dim
    (Along((-1,)), [S(-1)], "all_gather(x, tp, src=S(-1), dst=R)"),
    (Along((-1,)), [S(0)], "consistently"),
    (Along((-1,)), [S(-2), S(-2)], "only the data operand"),
    (Transpose(0, 1), [S(-1)], "consistently"),
    (Transpose(-2, -1), [S(0)], "consistently"),
    (Squeeze(None), [S(0)], "squeeze(dim)"),
    (Squeeze((0,)), [S(-1)], "consistently"),
    (Squeeze((0,)), [S(0)], "all_gather"),
    (Squeeze((-1,)), [S(-2)], "consistently"),  # S(-1) if dim -1 has size 1, else S(-2)
    (Flatten(0, 1), [S(1)], "all_gather(x, tp, src=S(1), dst=R)"),
    (Reduce((-1,), False, "sum"), [S(0)], "consistently"),
    (View(), [S(0)], "x.shape"),
    (View(prefix=1, ndim=3), [S(1)], "x.shape"),
    (View(suffix=1, ndim=3), [S(0)], "x.shape"),
    (Opaque(), [S(0), R], "local_map(tp)"),
]


@pytest.mark.parametrize("behaviour, operands, fix", MISMATCHES, ids=lambda v: str(v))
def test_shard_mismatch(behaviour, operands, fix):
    rejects(behaviour, operands, Code.SHARD_MISMATCH, fix)


# --------------------------------------------------------------------------
# Orders and effective specs
# --------------------------------------------------------------------------


def test_effective_order_counts_global_axes_only():
    t = TensorType.parse("S(0)@(dp,tp),R@cp")
    assert sharding.effective(t, "tp", ["tp"]) == S(0)
    assert sharding.effective(t, "tp", ["dp", "tp"]) == S(0, 1)
    assert sharding.effective(t, "dp", ["dp", "tp"]) == S(0, 0)
    assert sharding.effective(t, "cp", ["tp"]) == R
    assert sharding.effective(t, "ep", ["tp"]) is None


def test_normalise_orders_renumbers_what_is_left():
    assert sharding.normalise_orders({"tp": S(0, 1), "dp": V}) == {"tp": S(0), "dp": V}
    assert sharding.normalise_orders({"tp": S(0, 2), "dp": S(0, 0), "cp": R}) == {
        "tp": S(0, 1),
        "dp": S(0, 0),
        "cp": R,
    }


def test_spec_mismatch_at_a_boundary():
    assert sharding.spec_mismatch(S(0), S(0), "tp", "x") is None
    assert sharding.spec_mismatch(S(0), V, "tp", "x") is None
    error = sharding.spec_mismatch(S(0), S(1), "tp", "parameter x")
    assert error is not None and error.code is Code.SHARD_MISMATCH
    assert "all_to_all(x, tp, src=S(1), dst=S(0))" in error.message
    error = sharding.spec_mismatch(S(0, 0), S(0, 1), "tp", "parameter x")
    assert error is not None and "redistribute" in error.message


# --------------------------------------------------------------------------
# Soundness: an accepted case computes the global op (simulated, 2 ranks)
# --------------------------------------------------------------------------


def _check_pointwise_on_data():
    # A tiny concrete check of the definition map(f, in_spec(x)) == out_spec(f(x))
    # for a permutation-like op: transpose(0, 1) of a 2x4 tensor split on dim 0.
    x = [[r * 4 + c for c in range(4)] for r in range(2)]  # 2x4
    pieces = [x[0:1], x[1:2]]  # S(0) over 2 ranks
    local = [[list(col) for col in zip(*p)] for p in pieces]  # transpose each
    glob = [list(col) for col in zip(*x)]  # 4x2
    # out spec S(1): cat local results on dim 1
    joined = [sum((local[k][i] for k in range(2)), []) for i in range(4)]
    return joined == glob


def test_transpose_result_matches_the_global_transpose():
    assert run(Transpose(0, 1), [S(0)]) == S(1)
    assert _check_pointwise_on_data()


@pytest.mark.parametrize("seed", range(20))
def test_reduction_result_dim_matches_shapes(seed):
    """For random ndims/dims: where propagation answers S(d'), the local result's dims say so too."""
    rng = random.Random(seed)
    n = rng.randint(1, 4)
    shard = rng.randrange(n)
    written = shard if rng.random() < 0.5 else shard - n
    reduced = rng.randrange(n)
    dim = reduced if rng.random() < 0.5 else reduced - n
    keepdim = rng.random() < 0.5
    try:
        result = run(Reduce((dim,), keepdim, "sum"), [S(written)])
    except SpmdTypeError as error:
        # Rejected: either the reduced dim is the sharded one for this ndim, or the dims may alias.
        assert reduced == shard or (written < 0) != (dim < 0), error.message
        return
    assert reduced != shard
    out_ndim = n if keepdim else n - 1
    expected = shard if keepdim or shard < reduced else shard - 1
    assert result.shard % out_ndim == expected
