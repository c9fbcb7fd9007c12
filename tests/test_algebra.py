"""The type algebra against every cell of docs/spec.md's tables.

The expected tables below are transcribed from docs/spec.md#transitions and
docs/spec.md#forward-and-backward (with the rows docs/spec.md#deviations
adds), independently of the algebra's own table.
"""

from __future__ import annotations

import itertools

import pytest

from spmd_stubs import core
from spmd_stubs.core import (
    SCALAR,
    Apply,
    Arg,
    AxisType,
    Code,
    Invariant,
    Linearity,
    Monotone,
    Partial,
    Replicate,
    Shard,
    SpmdTypeError,
    Step,
    TensorType,
    Varying,
    backward_of,
    check_source,
    dual,
    evaluate,
    route,
    transition,
)

T = {"R": Replicate, "I": Invariant, "V": Varying, "P": Partial}
ALL_TYPES = [Replicate, Invariant, Varying, Partial, Shard(0), Shard(-1)]

# docs/spec.md#transitions, with docs/spec.md#deviations' convert(I,R)
# (Megatron's copy_to_tensor_model_parallel_region) and its gated mirror
# convert(R,I).  "*" marks the expert_mode gate (docs/spec.md#expert-mode).
SPEC_TRANSITIONS = """
reinterpret R I *
reinterpret R V *
reinterpret R P *
convert     R V
convert     R P
reinterpret I R
reinterpret I V
convert     I V
convert     I P *
convert     I R
convert     R I *
all_gather  V R
all_gather  V I
all_to_all  V V
reinterpret V P
convert     V P *
all_reduce  P R
all_reduce  P I
reduce_scatter P V
"""

# docs/spec.md#forward-and-backward (both directions), with
# convert(I,R) behaving as reinterpret(I,R) and convert(R,I) as reinterpret(R,I).
SPEC_BACKWARDS = """
reinterpret R I   convert I P
reinterpret R V   reinterpret V P
convert R V       convert V P
reinterpret R P   reinterpret R P
convert R P       convert R P
reinterpret I R   all_reduce P I
convert I R       all_reduce P I
convert R I       convert I P
convert I V       all_gather V I
convert I P       reinterpret R I
all_gather V R    reduce_scatter P V
all_gather V I    convert I V
all_to_all V V    all_to_all V V
reinterpret V P   reinterpret R V
convert V P       convert R V
all_reduce P R    all_reduce P R
all_reduce P I    reinterpret I R
reduce_scatter P V   all_gather V R
reinterpret I V   all_reduce V I
"""


def _parse_transitions() -> dict[tuple[str, str, str], bool]:
    table = {}
    for line in SPEC_TRANSITIONS.strip().splitlines():
        op, src, dst, *gate = line.split()
        table[(op, src, dst)] = bool(gate)
    return table


def _parse_backwards() -> dict[tuple[str, str, str], tuple[str, str, str]]:
    table = {}
    for line in SPEC_BACKWARDS.strip().splitlines():
        fop, fsrc, fdst, bop, bsrc, bdst = line.split()
        table[(fop, fsrc, fdst)] = (bop, bsrc, bdst)
    return table


EXPECTED_TRANSITIONS = _parse_transitions()
EXPECTED_BACKWARDS = _parse_backwards()
OPS = ("reinterpret", "convert", "all_reduce", "all_gather", "reduce_scatter", "all_to_all")


@pytest.mark.parametrize(
    "op,src,dst", list(itertools.product(OPS, "RIVP", "RIVP")), ids=lambda v: str(v)
)
def test_transition_cell(op: str, src: str, dst: str) -> None:
    """Every (op, src, dst) cell: valid, gated, or invalid with a better call named."""
    expected = EXPECTED_TRANSITIONS.get((op, src, dst))
    implicit_partial = op in ("all_reduce", "reduce_scatter") and src == "V"
    if implicit_partial:
        # src=V means reinterpret(V,P) first (docs/spec.md#deviations).
        expected = EXPECTED_TRANSITIONS.get((op, "P", dst))
    if src == dst and op in ("reinterpret", "convert"):
        assert transition(op, T[src], T[dst], "tp") == T[dst]
        return
    if expected is None:
        with pytest.raises(SpmdTypeError) as err:
            transition(op, T[src], T[dst], "tp", expert_mode=True)
        wanted = Code.INVALID_TRANSITION if op in ("reinterpret", "convert") else Code.COLLECTIVE
        assert err.value.code is wanted
        _assert_teaches(err.value, "tp")
        suggested = route(T[src], T[dst])
        if suggested is not None:
            assert f"{suggested.op}(x, tp, src={src}, dst={dst}" in str(err.value)
        return
    if expected:
        with pytest.raises(SpmdTypeError) as err:
            transition(op, T[src], T[dst], "tp")
        assert err.value.code is Code.EXPERT_MODE
        assert f"{op}(x, tp, src={src}, dst={dst}, expert_mode=True)" in str(err.value)
    assert transition(op, T[src], T[dst], "tp", expert_mode=True) == T[dst]


def test_table_has_no_extra_transitions() -> None:
    got = {(op, s.value, d.value): gated for op, s, d, gated in core.transitions()}
    assert got == EXPECTED_TRANSITIONS


@pytest.mark.parametrize("fwd", sorted(EXPECTED_BACKWARDS), ids=" ".join)
def test_backward_cell(fwd: tuple[str, str, str]) -> None:
    op, src, dst = fwd
    got = backward_of(op, T[src], T[dst])
    assert (got.op, str(got.src), str(got.dst)) == EXPECTED_BACKWARDS[fwd]


@pytest.mark.parametrize("fwd", sorted(EXPECTED_BACKWARDS), ids=" ".join)
def test_backward_types_are_the_duals(fwd: tuple[str, str, str]) -> None:
    """A backward maps dual(dst) to dual(src): the gradient types of docs/spec.md#forward-and-backward."""
    op, src, dst = fwd
    step = backward_of(op, T[src], T[dst])
    assert (step.src, step.dst) == (dual(T[dst]), dual(T[src]))


def test_backward_of_backward_is_forward() -> None:
    for (op, src, dst), (bop, bsrc, bdst) in EXPECTED_BACKWARDS.items():
        if (bop, bsrc, bdst) in EXPECTED_BACKWARDS and (op, src, dst) not in (
            ("convert", "I", "R"),
            ("convert", "R", "I"),
        ):
            again = backward_of(bop, T[bsrc], T[bdst])
            assert (again.op, str(again.src), str(again.dst)) == (op, src, dst)


def test_every_rows_backward_is_a_row() -> None:
    """A row's backward, from dual(dst) to dual(src), is a row of the table.

    The one exception is documented (docs/spec.md#forward-and-backward):
    reinterpret(I,V)'s backward all_reduce(V,I) is the implicit form of the
    all_reduce(P,I) row.
    """
    rows = {row.key for row in core.TRANSITIONS}
    implicit = []
    for row in core.TRANSITIONS:
        back = (row.backward, dual(AxisType(row.dst)).kind, dual(AxisType(row.src)).kind)
        if back not in rows:
            implicit.append(row.key)
            assert back[0] in core.IMPLICIT_PARTIAL and back[1] is core.Kind.V
            assert (back[0], core.Kind.P, back[2]) in rows
    assert implicit == [("reinterpret", core.Kind.I, core.Kind.V)]


def test_every_valid_transition_has_a_valid_backward() -> None:
    for row in core.TRANSITIONS:
        step = backward_of(row.op, AxisType(row.src), AxisType(row.dst))
        transition(step.op, step.src, step.dst, "tp", expert_mode=True)


def test_the_table_has_one_row_per_key() -> None:
    assert len({row.key for row in core.TRANSITIONS}) == len(core.TRANSITIONS)


def test_no_two_value_keeping_rows_share_a_pair() -> None:
    """redistribute's route for a pair is the one row that keeps the value (every op but reinterpret)."""
    pairs = [(row.src, row.dst) for row in core.TRANSITIONS if row.op != "reinterpret"]
    assert len(set(pairs)) == len(pairs)


def test_rows_for_any_reduction_are_never_gated() -> None:
    """docs/spec.md#pending-reductions: the pairs of a pending avg/max/min exist, none gated."""
    rows = [row for row in core.TRANSITIONS if row.any_reduce]
    assert {(row.op, row.src.value, row.dst.value) for row in rows} == {
        (op, src, "V" if dst == "S(0)" else dst) for op, src, dst in NON_SUM_VALID
    }
    assert not any(row.gated for row in rows)


def test_shards_keep_their_dim_through_duality() -> None:
    assert dual(Shard(-1)) == Shard(-1)
    assert backward_of("all_gather", Shard(0), Replicate) == Step("reduce_scatter", Partial, Shard(0))
    assert backward_of("all_to_all", Shard(0), Shard(1)) == Step("all_to_all", Shard(1), Shard(0))
    assert backward_of("convert", Invariant, Shard(-1)) == Step("all_gather", Shard(-1), Invariant)


def test_dual_table() -> None:
    """docs/spec.md#forward-and-backward: R <-> P, I <-> I, V <-> V, and dual is an involution."""
    assert [str(dual(T[k])) for k in "RIVP"] == ["P", "I", "V", "R"]
    for t in ALL_TYPES:
        assert dual(dual(t)) == t


def test_shard_transitions() -> None:
    assert transition("convert", Replicate, Shard(0), "tp") == Shard(0)
    assert transition("convert", Invariant, Shard(-1), "tp") == Shard(-1)
    assert transition("all_gather", Shard(0), Replicate, "tp") == Replicate
    assert transition("reduce_scatter", Partial, Shard(1), "tp") == Shard(1)
    assert transition("all_to_all", Shard(0), Shard(1), "tp") == Shard(1)
    assert transition("convert", Shard(0), Partial, "tp", expert_mode=True) == Partial
    with pytest.raises(SpmdTypeError, match="use all_to_all"):
        transition("convert", Shard(0), Shard(1), "tp")
    with pytest.raises(SpmdTypeError, match="V to V or S"):
        transition("all_to_all", Varying, Shard(1), "tp")
    with pytest.raises(SpmdTypeError, match="cannot pick a shard dim"):
        transition("reinterpret", Invariant, Shard(0), "tp")


# docs/spec.md#transitions, "redistribute": the routing, plus the no-comm ones.
SPEC_ROUTES = {
    ("S0", "R"): "all_gather",
    ("S0", "I"): "all_gather",
    ("P", "R"): "all_reduce",
    ("P", "I"): "all_reduce",
    ("P", "S0"): "reduce_scatter",
    ("S0", "S1"): "all_to_all",
    ("R", "I"): "convert",
    ("I", "R"): "convert",
    ("R", "V"): "convert",
    ("R", "P"): "convert",
    ("I", "V"): "convert",
    ("I", "P"): "convert",
    ("V", "P"): "convert",
}


@pytest.mark.parametrize("pair", sorted(SPEC_ROUTES), ids="->".join)
def test_route(pair: tuple[str, str]) -> None:
    parse = {"S0": Shard(0), "S1": Shard(1), **T}
    src, dst = parse[pair[0]], parse[pair[1]]
    step = route(src, dst)
    assert step is not None and step.op == SPEC_ROUTES[pair]
    transition(step.op, src, dst, "tp", expert_mode=True)  # the route is a valid call
    assert transition("redistribute", src, dst, "tp") == dst


def test_route_noop() -> None:
    for t in ALL_TYPES:
        assert route(t, t) is None
    assert route(Varying, Shard(0)) is None


def test_reinterpret_invariant_partial_is_invalid_with_fix() -> None:
    """docs/spec.md#deviations: reinterpret(I,P) is not a reinterpret."""
    with pytest.raises(SpmdTypeError) as err:
        transition("reinterpret", Invariant, Partial, "tp", expert_mode=True)
    assert err.value.code is Code.INVALID_TRANSITION
    assert "convert(x, tp, src=I, dst=P, expert_mode=True)" in str(err.value)


# ---------------------------------------------------------------------------
# Op typing rules (docs/spec.md#local-rules), per linearity.
# ---------------------------------------------------------------------------

S = SCALAR
E_MUL, E_AFF, E_NL = Code.PARTIAL_MUL, Code.PARTIAL_AFFINE, Code.PARTIAL_NONLINEAR
E_VAR, E_INV = Code.PARTIAL_VARYING, Code.INVARIANT_MIX

# Binary ops over {R, I, V, P, scalar}: the expected result or error code.
_PLAIN = {
    ("R", "R"): "R", ("R", "V"): "V", ("V", "V"): "V", ("I", "I"): "I",
    ("R", "s"): "R", ("V", "s"): "V", ("I", "s"): "I",
    ("I", "R"): E_INV, ("I", "V"): E_INV,
}  # fmt: skip
BINARY_RULES = {
    Linearity.NONLINEAR: {
        **_PLAIN,
        ("P", "P"): E_NL, ("P", "R"): E_NL, ("P", "V"): E_NL, ("P", "I"): E_NL, ("P", "s"): E_NL,
    },
    Linearity.ADDITIVE: {
        **_PLAIN,
        ("P", "P"): "P", ("P", "R"): E_AFF, ("P", "s"): E_AFF, ("P", "V"): E_VAR, ("P", "I"): E_INV,
    },
    Linearity.MULTILINEAR: {
        **_PLAIN,
        ("P", "P"): E_MUL, ("P", "R"): "P", ("P", "s"): "P", ("P", "V"): E_VAR, ("P", "I"): E_INV,
    },
}  # fmt: skip


def _operand(name: str) -> AxisType | core.Scalar:
    return SCALAR if name == "s" else T[name]


def _binary_cases() -> list[tuple[Linearity, str, str, object]]:
    cases = []
    for linearity, table in BINARY_RULES.items():
        for (a, b), expected in table.items():
            cases.append((linearity, a, b, expected))
            if a != b:
                cases.append((linearity, b, a, expected))  # rules are symmetric
    return cases


@pytest.mark.parametrize("linearity,a,b,expected", _binary_cases())
def test_binary_rule(linearity: Linearity, a: str, b: str, expected: object) -> None:
    expr = Apply(linearity, Arg(0), Arg(1))
    operands = [_operand(a), _operand(b)]
    if isinstance(expected, Code):
        with pytest.raises(SpmdTypeError) as err:
            evaluate(expr, operands, "op", "tp")
        assert err.value.code is expected
        _assert_teaches(err.value, "tp")
    else:
        assert evaluate(expr, operands, "op", "tp") == T[expected]


def test_binary_tables_cover_every_pair() -> None:
    names = ["R", "I", "V", "P", "s"]
    for table in BINARY_RULES.values():
        covered = set(table) | {(b, a) for a, b in table}
        missing = {(a, b) for a in names for b in names} - covered - {("s", "s")}
        assert not missing


@pytest.mark.parametrize("name", "RIVP")
def test_linear_unary_keeps_every_type(name: str) -> None:
    assert evaluate(Apply(Linearity.LINEAR, Arg(0)), [T[name]], "neg", "tp") == T[name]


def test_local_op_on_shard_gives_varying() -> None:
    assert evaluate(Apply(Linearity.LINEAR, Arg(0)), [Shard(0)], "view", "tp") == Varying
    assert evaluate(Apply(Linearity.NONLINEAR, Arg(0)), [Shard(-1)], "gelu", "tp") == Varying


SELECT_RULES = {
    ("R", "P"): "P", ("I", "P"): "P", ("R", "I"): "I", ("I", "R"): "R", ("R", "V"): "V",
    ("V", "R"): "V", ("V", "V"): "V", ("V", "I"): E_INV, ("V", "P"): E_VAR,
    ("P", "R"): E_NL, ("P", "P"): E_NL, ("R", "s"): "R", ("I", "s"): "I", ("V", "s"): "V",
    ("s", "P"): "P",
}  # fmt: skip


@pytest.mark.parametrize("selector,data", sorted(SELECT_RULES))
def test_select_rule(selector: str, data: str) -> None:
    """Masks and indices get no gradient: only a varying or partial selector matters."""
    expected = SELECT_RULES[(selector, data)]
    expr = Apply(Linearity.SELECT, Arg(0), Arg(1))
    operands = [_operand(selector), _operand(data)]
    if isinstance(expected, Code):
        with pytest.raises(SpmdTypeError) as err:
            evaluate(expr, operands, "where", "tp")
        assert err.value.code is expected
    else:
        assert evaluate(expr, operands, "where", "tp") == T[expected]


def test_composite_linear_with_bias_is_affine() -> None:
    """linear(x, w, b) = x @ w.T + b: a Partial input plus a replicated bias is affine."""
    linear = Apply(Linearity.ADDITIVE, Apply(Linearity.MULTILINEAR, Arg(0), Arg(1)), Arg(2))
    assert evaluate(linear, [Partial, Replicate, Partial], "linear", "tp") == Partial
    assert evaluate(linear, [Varying, Shard(0), Varying], "linear", "tp") == Varying
    with pytest.raises(SpmdTypeError) as err:
        evaluate(linear, [Partial, Replicate, Replicate], "linear", "tp")
    assert err.value.code is Code.PARTIAL_AFFINE


def test_unknown_operands_are_left_out() -> None:
    mul = Apply(Linearity.MULTILINEAR, Arg(0), Arg(1))
    assert evaluate(mul, [Partial, None], "mul", "tp") == Partial
    assert evaluate(mul, [None, None], "mul", "tp") is None
    assert evaluate(mul, [None, SCALAR], "mul", "tp") is None


def test_nary_additive_all_partial() -> None:
    cat = Apply(Linearity.ADDITIVE, Arg(0), Arg(1), Arg(2))
    assert evaluate(cat, [Partial, Partial, Partial], "cat", "tp") == Partial
    with pytest.raises(SpmdTypeError):
        evaluate(cat, [Partial, Partial, Replicate], "cat", "tp")


def test_check_source() -> None:
    check_source("all_gather", Shard(0), Varying, "tp")  # V and S(i) agree locally
    check_source("all_reduce", Partial, Partial, "tp")
    check_source("all_reduce", Partial, Varying, "tp")  # implicit reinterpret(V,P)
    check_source("reduce_scatter", Partial, Shard(1), "tp")
    with pytest.raises(SpmdTypeError):
        check_source("all_gather", Partial, Varying, "tp")
    with pytest.raises(SpmdTypeError):
        check_source("all_reduce", Varying, Partial, "tp")
    with pytest.raises(SpmdTypeError) as err:
        check_source("all_reduce", Partial, Replicate, "tp")
    assert err.value.code is Code.COLLECTIVE
    assert "R@tp" in str(err.value) and "src=R" in str(err.value)


def _assert_teaches(err: SpmdTypeError, axis: str) -> None:
    """Errors teach: they name the axis, show types as TYPE@axis, and give a fix: a rewrite a tool
    can apply, or the options, said plainly to need a choice."""
    text = str(err)
    assert err.axis == axis
    assert f"axis {axis}" in text
    assert ("Fix:" in text) == (err.fix is not None), text
    assert err.fix is not None or "Fix (needs your choice):" in text
    assert "src=" in text and "dst=" in text


# ---------------------------------------------------------------------------
# Text forms
# ---------------------------------------------------------------------------


def test_tensor_type_text_round_trip() -> None:
    t = TensorType.parse("V@dp, S(-1)@tp, P@cp")
    assert t.canonical() == "P@cp,V@dp,S(-1)@tp"
    assert TensorType.parse(t.canonical()) == t
    assert str(t) == "P@cp, V@dp, S(-1)@tp"


@pytest.mark.parametrize("bad", ["X@tp", "R", "R@tp,V@tp", "S@tp", "S(x)@tp", "R@"])
def test_tensor_type_parse_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        TensorType.parse(bad)


# --------------------------------------------------------------------------
# Partition specs: several axes on one dim, in order
# --------------------------------------------------------------------------


def test_shard_group_round_trip_keeps_order() -> None:
    spec = TensorType.parse("S(0)@(dp,tp),R@cp")
    assert spec.get("dp") == core.Shard(0, 0) and spec.get("tp") == core.Shard(0, 1)
    assert spec.shard_axes(0) == ("dp", "tp")
    assert spec.canonical() == "R@cp,S(0)@(dp,tp)"
    assert TensorType.parse(spec.canonical()) == spec
    assert TensorType.parse("S(0)@(tp,dp)").shard_axes(0) == ("tp", "dp")
    assert TensorType.parse("S(0)@(tp,dp)") != spec


def test_shard_group_decays_to_local() -> None:
    spec = TensorType.parse("S(0)@(dp,tp)")
    assert {t.local for _, t in spec.axes} == {core.Varying}


def test_unordered_dims_are_reported() -> None:
    assert TensorType.parse("S(0)@dp,S(0)@tp").unordered_dims() == [0]
    assert TensorType.parse("S(0)@(dp,tp),S(1)@cp").unordered_dims() == []


@pytest.mark.parametrize("bad", ["R@(dp,tp)", "P@(dp,tp)", "S(0)@(dp,dp)"])
def test_only_distinct_shards_group(bad: str) -> None:
    with pytest.raises(ValueError):
        TensorType.parse(bad)


# --------------------------------------------------------------------------
# Partials pending avg, max, min (docs/spec.md#pending-reductions)
# --------------------------------------------------------------------------

PAVG, PMAX, PMIN = (core.PartialOf(r) for r in ("avg", "max", "min"))
ADD = Apply(Linearity.ADDITIVE, Arg(0), Arg(1))
MUL = Apply(Linearity.MULTILINEAR, Arg(0), Arg(1))
UNARY_NONLINEAR = Apply(Linearity.NONLINEAR, Arg(0))


def test_reduce_text_round_trip() -> None:
    spec = TensorType.parse("Pavg@dp,Pmax@tp,Pmin@cp,P@ep")
    assert [str(t) for _, t in spec.axes] == ["Pmin", "Pavg", "P", "Pmax"]
    assert TensorType.parse(spec.canonical()) == spec
    with pytest.raises(ValueError):
        core.AxisType(core.Kind.R, reduce="max")
    with pytest.raises(ValueError):
        core.PartialOf("product")


def test_average_is_affine_but_not_nonlinear() -> None:
    assert evaluate(ADD, [PAVG, core.Replicate], "add", "tp") == PAVG
    assert evaluate(MUL, [PAVG, SCALAR], "mul", "tp") == PAVG
    with pytest.raises(SpmdTypeError) as err:
        evaluate(UNARY_NONLINEAR, [PAVG], "exp", "tp")
    assert err.value.code is Code.PARTIAL_NONLINEAR and "src=Pavg" in str(err.value)


def test_two_reductions_do_not_mix() -> None:
    with pytest.raises(SpmdTypeError) as err:
        evaluate(ADD, [PAVG, core.Partial], "add", "tp")
    assert err.value.code is Code.PARTIAL_AFFINE


@pytest.mark.parametrize(
    "effect, operands, expected",
    [
        (Monotone.INCREASING, [PMAX], PMAX),
        (Monotone.DECREASING, [PMAX], PMIN),
        (Monotone.DECREASING, [PMIN], PMAX),
        (Monotone.MOVES, [PMAX, core.Replicate], PMAX),
        (Monotone.MOVES, [PMIN, PMIN], PMIN),
        ((Monotone.INCREASING, Monotone.DECREASING), [PMAX, core.Replicate], PMAX),
        ((Monotone.INCREASING, Monotone.DECREASING), [core.Replicate, PMAX], PMIN),
        (Monotone.MAX, [PMAX], PMAX),
    ],
)
def test_extremum_through_monotone_ops(effect: core.Effect, operands: list, expected: core.AxisType) -> None:
    expr = Apply(Linearity.NONLINEAR, *(Arg(i) for i in range(len(operands))))
    assert evaluate(expr, operands, "op", "tp", effect) == expected


@pytest.mark.parametrize(
    "effect, operands, code",
    [
        (None, [PMAX], Code.PARTIAL_NONLINEAR),
        (Monotone.MIN, [PMAX], Code.PARTIAL_NONLINEAR),
        (Monotone.INCREASING, [PMAX, PMAX], Code.PARTIAL_MUL),
        (Monotone.MOVES, [PMAX, core.Varying], Code.PARTIAL_VARYING),
        (Monotone.MOVES, [PMAX, core.Invariant], Code.INVARIANT_MIX),
        (Monotone.MOVES, [PMAX, PMIN], Code.PARTIAL_AFFINE),
    ],
)
def test_extremum_rejections(effect: core.Effect, operands: list, code: Code) -> None:
    expr = Apply(Linearity.NONLINEAR, *(Arg(i) for i in range(len(operands))))
    with pytest.raises(SpmdTypeError) as err:
        evaluate(expr, operands, "op", "tp", effect)
    assert err.value.code is code and "tp" in str(err.value)


def test_extremum_inside_a_composite_is_rejected() -> None:
    linear = Apply(Linearity.ADDITIVE, Apply(Linearity.MULTILINEAR, Arg(0), Arg(1)), Arg(2))
    with pytest.raises(SpmdTypeError):
        evaluate(linear, [PMAX, core.Replicate, core.Replicate], "linear", "tp", Monotone.INCREASING)


NON_SUM_VALID = [
    ("all_reduce", "P", "R"),
    ("all_reduce", "P", "I"),
    ("reduce_scatter", "P", "V"),
    ("reduce_scatter", "P", "S(0)"),
    ("convert", "R", "P"),
    ("reinterpret", "V", "P"),
]


@pytest.mark.parametrize("reduce", ["avg", "max", "min"])
def test_non_sum_partial_transitions(reduce: str) -> None:
    def typ(text: str) -> core.AxisType:
        return core.PartialOf(reduce) if text == "P" else core.parse_axis_type(text)

    for op, src, dst in NON_SUM_VALID:
        assert transition(op, typ(src), typ(dst), "tp") == typ(dst)
    for op, src, dst in [
        ("reinterpret", "R", "P"),
        ("convert", "I", "P"),
        ("convert", "V", "P"),
        ("convert", "P", "R"),
        ("all_gather", "P", "R"),
    ]:
        with pytest.raises(SpmdTypeError) as err:
            transition(op, typ(src), typ(dst), "tp", expert_mode=True)
        assert f"P{reduce}" in str(err.value) and "Fix:" in str(err.value)


@pytest.mark.parametrize(
    "src, dst, fix",
    [
        (PMAX, core.Partial, "all_reduce(x, tp, src=Pmax, dst=R), then convert(x, tp, src=R, dst=P)"),
        (Shard(0), PMAX, "all_gather(x, tp, src=S(0), dst=R), then convert(x, tp, src=R, dst=Pmax)"),
        (Invariant, PAVG, "convert(x, tp, src=I, dst=R), then convert(x, tp, src=R, dst=Pavg)"),
    ],
)
def test_redistribute_has_no_one_step_route(src: AxisType, dst: AxisType, fix: str) -> None:
    for attempt in (lambda: transition("redistribute", src, dst, "tp"), lambda: route(src, dst, "tp")):
        with pytest.raises(SpmdTypeError) as err:
            attempt()
        assert err.value.code is Code.COLLECTIVE and fix in str(err.value)
    assert route(Replicate, PMAX) == Step("convert", Replicate, PMAX)


def test_non_sum_duals_and_losses() -> None:
    assert core.dual(PAVG) == core.Replicate
    assert core.dual(PMAX) == core.Varying == core.dual(PMIN)
    core.check_loss(core.Partial, "dp")
    for loss in (PAVG, PMAX):
        with pytest.raises(SpmdTypeError) as err:
            core.check_loss(loss, "dp")
        assert err.value.code is Code.BACKWARD


@pytest.mark.parametrize("pending", [PAVG, PMAX, PMIN], ids=str)
def test_casts_making_a_non_sum_partial_have_identity_backwards(pending: core.AxisType) -> None:
    """convert(R,Pop) and reinterpret(V,Pop) keep each rank's value: the backward only retypes."""
    for op, src in [("convert", Replicate), ("reinterpret", core.Varying)]:
        step = backward_of(op, src, pending)
        assert step == Step("reinterpret", dual(pending), dual(src))
        # The backward is itself a valid transition (expert for reinterpret(R,P)).
        transition(step.op, step.src, step.dst, "tp", expert_mode=True)


def test_a_cast_to_its_own_type_is_its_own_backward() -> None:
    assert backward_of("reinterpret", core.Varying, core.Varying) == Step(
        "reinterpret", core.Varying, core.Varying
    )
    assert backward_of("convert", Replicate, Replicate) == Step("convert", Partial, Partial)
