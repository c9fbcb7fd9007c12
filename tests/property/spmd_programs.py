"""Random typed SPMD programs over the local vocabulary, as a hypothesis strategy.

A program takes one to three inputs with a random type on each axis of a
2 (dp) x 2 (tp) mesh, runs a few ordinary torch ops and typed collectives /
casts on them, reduces one value to a scalar loss, usually finishes it with
collectives that make it I or P on every axis, and calls ``loss.backward()``.
It is written out as the Python source of one annotated function
(:func:`to_source`) for mypy and the runtime shim, and kept as a list of
statements (:class:`Program`) for the reference semantics.

Generation is type-directed: a tracker (the rules of ``spmd_stubs.core``)
follows each value's type, so most programs are well typed. Some programs are
"wild": each step may ignore the types (a Partial times a Partial, a wrong
``src``, a gated cast without ``expert_mode``, an unfinished loss), so the
checker has something to reject. The tracker is only a guide for the
generator; what is accepted is decided by mypy, what is correct by the
reference (``spmd_reference``).

Some steps are SELECT ops (``F.cross_entropy(x, s)``, ``x[s]``) whose selector
is an untyped input (:class:`Selector`, a plain ``torch.Tensor`` like labels
from a data loader): unknown on every axis, so the data decides
(docs/spec.md#select). Its values may differ between ranks only on axes where
the data varies too (labels sharded with the batch); a selector that varies
where the data does not is the gradual rule's documented blind spot.

With ``extended``, two more families (:func:`programs`):

* index selections whose index is typed: ``index_select``, ``torch.gather``,
  ``x[index]``, ``scatter_add``, ``index_add`` with an integer input typed
  R, I or V per axis (:class:`Index`), or an index computed from a typed
  value by ``argmax`` or ``topk(...).indices`` (no gradient, the value's
  type); and ``topk(...).values``;
* the uneven ``all_to_all(x, axis, src=V, dst=V, input_split_sizes=,
  output_split_sizes=)``, the counts a typed input (:class:`RowCounts`)
  exchanged in the program as a dispatcher does; wild programs also call it
  on an R, I or P input or declare S(0), which the checker must reject;
* mesh transitions (:mod:`spmd_meshes`): a value moved to ``ep``, the
  flattening of (dp, tp) over the same 4 ranks, by ``spmd.reinterpret_mesh(x,
  {(dp, tp): ep})`` (a :class:`Move`: an alias, its type by
  ``spmd_stubs.core.mesh_transitions.regroup``), ops and typed collectives on
  ep among the values there (``Value.mesh`` is ``(EP,)``), then a value moved
  back with ``{ep: (dp, tp)}`` or the loss finished on ep; wild programs also
  move a group whose axes hold different types or name it ``{(tp, dp): ep}``.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field
from typing import Callable, Optional, Union

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from spmd_calls import Helper

from spmd_stubs import core
from spmd_stubs.core import Apply, Arg, AxisType, Kind, Linearity, Replicate, SpmdTypeError, Varying
from spmd_stubs.core.comms import check_row_exchange, row_exchange_elsewhere

AXES = ("dp", "tp")
AXIS_SIZE = 2
EP = "ep"
"""The flattening of ``AXES`` over the same 4 ranks (dp outermost): a value moves there by ``reinterpret_mesh``."""
SIZES = {**{axis: AXIS_SIZE for axis in AXES}, EP: AXIS_SIZE ** len(AXES)}
MAX_NUMEL = 128
MAX_NDIM = 4

Shape = tuple[int, ...]
Types = tuple[AxisType, ...]
"""One type per axis of a value's mesh (``AXES``, or ``(EP,)``), in its order."""


# --------------------------------------------------------------------------
# Statements
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Value:
    """A live variable: its name, local shape (the same on every rank) and types on the axes of ``mesh``."""

    name: str
    shape: Shape
    types: Types
    mesh: tuple[str, ...] = AXES


@dataclass(frozen=True)
class Local:
    """``target = <expression>``: an ordinary torch op, no communication."""

    target: Value
    expression: str
    args: tuple[str, ...]
    op_constants: bool = False
    """Whether the op takes an operand without its gradient (``.detach()``, a mask)."""


@dataclass(frozen=True)
class Comm:
    """``target = spmd.<op>(arg, axis, src=, dst=[, expert_mode=True])``.

    ``counts``: an uneven ``all_to_all`` whose row counts are the :class:`RowCounts` input of that
    name: this rank's counts are what it sends, their exchange what it receives.
    """

    target: Value
    op: str
    arg: str
    axis: str
    src: AxisType
    dst: AxisType
    expert: bool
    counts: Optional[str] = None

    @property
    def expression(self) -> str:
        flag = ", expert_mode=True" if self.expert else ""
        if self.counts is not None:
            received = f"spmd.all_to_all({self.counts}, {self.axis}, src=V, dst=V).tolist()"
            flag += f", input_split_sizes={self.counts}.tolist(), output_split_sizes={received}"
        return f"spmd.{self.op}({self.arg}, {self.axis}, src={self.src}, dst={self.dst}{flag})"


@dataclass(frozen=True)
class Call:
    """``target = <helper>(arg)``: a module-level helper (:mod:`spmd_calls`), written before the program.

    ``group_axis`` is the axis whose group a Function with a group is passed
    (its own axis, or in a wild program the other one); the body reduces over it.
    """

    target: Value
    helper: Helper
    arg: str
    group_axis: Optional[str] = None

    @property
    def expression(self) -> str:
        return self.helper.call(self.arg, self.group_axis)

    @property
    def reduced_axis(self) -> Optional[str]:
        """The axis the call all-reduces at run time."""
        return self.group_axis if self.helper.group else self.helper.reduce


@dataclass(frozen=True)
class Move:
    """``target = spmd.reinterpret_mesh(arg, {source: destination})``: the same local tensors on other axes
    over the same ranks (docs/spec.md#meshes-over-the-same-ranks); each side one axis or a tuple."""

    target: Value
    arg: str
    source: tuple[str, ...]
    destination: tuple[str, ...]

    @property
    def expression(self) -> str:
        return f"spmd.reinterpret_mesh({self.arg}, {{{_written(self.source)}: {_written(self.destination)}}})"


def _written(axes: tuple[str, ...]) -> str:
    return axes[0] if len(axes) == 1 else "(" + ", ".join(axes) + ")"


Statement = Union[Local, Comm, Call, Move]


@dataclass(frozen=True)
class Selector:
    """An untyped input (``torch.Tensor``): integer indices in ``[0, bound)``, like labels from a data loader.

    The checker sees it as unknown on every axis; ``varies`` (one flag per
    axis of ``AXES``) says where its values in fact differ between ranks.
    """

    name: str
    shape: Shape
    bound: int
    varies: tuple[bool, ...]


@dataclass(frozen=True)
class Index:
    """Integer indices in ``[0, bound)`` with a type per axis: a typed input (``Tensor[R@dp, V@tp]``), or
    a value computed by ``argmax``/``topk(...).indices`` (the statement that makes it names it).

    An input's values are the same on every rank of an axis where it is R or I and its own on every
    rank where it is V, as its type says; it takes no gradient.
    """

    name: str
    shape: Shape
    bound: int
    types: Types


@dataclass(frozen=True)
class RowCounts:
    """A typed input (``Tensor[R@dp, V@tp]`` for ``axis`` tp): this rank's row counts for an uneven ``all_to_all``.

    In each group of ``axis``, member i sends member k ``counts[k]`` of its ``rows`` rows. Every member
    sends and receives ``rows`` rows in all (each group's matrix of counts is a sum of ``rows``
    permutations), so the local shape stays the same on every rank while the rows move unevenly.
    ``types`` is V on ``axis`` and, on each other axis, R (every group the same matrix) or V (each
    group its own).
    """

    name: str
    axis: str
    rows: int
    types: Types


UNEVEN_COUNTS_VARY_WHERE_ROWS_DO_NOT = "uneven all_to_all, counts vary where its rows do not"
"""The feature of an exchange whose counts vary on another axis where its rows are R, I or P: the rows
each rank gets then differ along that axis. R rows become V there; I or P rows are rejected
(:func:`spmd_stubs.core.comms.row_exchange_elsewhere`: the checker reads the counts' type through
``.tolist()``)."""


@dataclass(frozen=True)
class Program:
    """A typed function: annotated inputs, statements, the loss it calls backward on.

    ``predicted`` is the set of error codes the tracker expects (empty for a
    program the rules accept); it is a guide and a cross-check, not the verdict.
    """

    inputs: tuple[Value, ...]
    body: tuple[Statement, ...]
    loss: Value
    predicted: frozenset[str]
    selectors: tuple[Selector, ...] = ()
    """Untyped selector inputs, parameters after ``inputs``."""
    indices: tuple[Index, ...] = ()
    """Typed index inputs, parameters after ``selectors``."""
    counts: tuple[RowCounts, ...] = ()
    """Row counts of uneven exchanges, the last parameters."""
    features: frozenset[str] = frozenset()
    """What a report counts the program under: the index ops and uneven exchanges it holds."""


def to_source(program: Program, name: str = "program") -> str:
    """The program as an annotated Python function (with its imports)."""
    params = ", ".join([f"{v.name}: {_annotation(v.types)}" for v in program.inputs]
                       + [f"{s.name}: torch.Tensor" for s in program.selectors]
                       + [f"{i.name}: {_annotation(i.types)}" for i in program.indices]
                       + [f"{c.name}: {_annotation(c.types)}" for c in program.counts])
    moves = any(isinstance(s, Move) for s in program.body)
    lines = [
        "from typing import Any",
        "",
        "import torch",
        "import torch.distributed as dist",
        "import torch.nn.functional as F",
        "",
        "import spmd_stubs as spmd",
        "from spmd_stubs import Group, I, P, R, S, Tensor, V",
        "from spmd_stubs.axes import dp, ep, tp" if moves else "from spmd_stubs.axes import dp, tp",
        "",
    ]
    for statement in program.body:
        if isinstance(statement, Call):
            lines += ["", statement.helper.source()]
    lines += [
        "",
        f"def {name}({params}) -> None:",
    ]
    lines += [f"    {s.target.name} = {s.expression}" for s in program.body]
    lines.append(f"    {program.loss.name}.backward()")
    return "\n".join(lines) + "\n"


def _annotation(types: Types) -> str:
    return "Tensor[" + ", ".join(t.on(axis) for axis, t in zip(AXES, types)) + "]"


# --------------------------------------------------------------------------
# Ordinary ops: source template, linearity (the algebra's expression), shape
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class OpSpec:
    """An ordinary op: ``template`` is formatted with operand names and ``dims``."""

    name: str
    template: str
    expr: core.Expr
    arity: int
    scalars: int = 0
    """Python scalar operands, numbered after the tensor ones in ``expr``."""
    constants: tuple[int, ...] = ()
    """Operands the template takes no gradient of (``.detach()``, a comparison): judged by
    :func:`spmd_stubs.core.evaluate_without_gradients`."""
    selector: bool = False
    """The template's last operand, numbered after the scalars, is an untyped :class:`Selector`."""


def _mul(*indices: int) -> Apply:
    return Apply(Linearity.MULTILINEAR, *(Arg(i) for i in indices))


_UNARY = [
    OpSpec("neg", "-{0}", Apply(Linearity.LINEAR, Arg(0)), 1),
    OpSpec("scale", "{0} * 0.5", _mul(0, 1), 1, scalars=1),
    OpSpec("shift", "{0} + 1.0", Apply(Linearity.ADDITIVE, Arg(0), Arg(1)), 1, scalars=1),
    OpSpec("tanh", "torch.tanh({0})", Apply(Linearity.NONLINEAR, Arg(0)), 1),
    OpSpec("exp", "torch.exp({0})", Apply(Linearity.NONLINEAR, Arg(0)), 1),
    OpSpec("gelu", "F.gelu({0})", Apply(Linearity.NONLINEAR, Arg(0)), 1),
]
_BINARY_SAME_SHAPE = [
    OpSpec("add", "{0} + {1}", Apply(Linearity.ADDITIVE, Arg(0), Arg(1)), 2),
    OpSpec("sub", "{0} - {1}", Apply(Linearity.ADDITIVE, Arg(0), Arg(1)), 2),
    OpSpec("mul", "{0} * {1}", _mul(0, 1), 2),
    # Operands without a gradient (docs/spec.md#operands-without-a-gradient).
    OpSpec("add_detached", "{0} + {1}.detach()", Apply(Linearity.ADDITIVE, Arg(0), Arg(1)), 2, constants=(1,)),
    OpSpec("mul_detached", "{0} * {1}.detach()", _mul(0, 1), 2, constants=(1,)),
    OpSpec("mul_mask", "{0} * ({1} > 0)",
           Apply(Linearity.MULTILINEAR, Arg(0), Apply(Linearity.NONLINEAR, Arg(1))), 2, constants=(1,)),
]
_LINEAR = Apply(Linearity.LINEAR, Arg(0))
_SUM_ALL = OpSpec("sum", "{0}.sum()", _LINEAR, 1)


_CROSS_ENTROPY = OpSpec("cross_entropy", "F.cross_entropy({0}, {1})",
                        Apply(Linearity.SELECT, Arg(1), Apply(Linearity.NONLINEAR, Arg(0))), 1, selector=True)
_INDEX = OpSpec("index", "{0}[{1}]", Apply(Linearity.SELECT, Arg(1), Arg(0)), 1, selector=True)


def _select_ops(shape: Shape) -> list[tuple[OpSpec, Shape, int, Shape]]:
    """SELECT ops on a value of ``shape`` with an untyped selector: (op, selector shape, bound, result shape)."""
    out: list[tuple[OpSpec, Shape, int, Shape]] = []
    if len(shape) == 2:
        out.append((_CROSS_ENTROPY, shape[:1], shape[1], ()))  # rows of class scores, one label per row
    if shape:
        for picked in (1, 3):
            out.append((_INDEX, (picked,), shape[0], (picked,) + shape[1:]))
    return out


def _shape_ops(shape: Shape) -> list[tuple[OpSpec, Shape]]:
    """Linear ops that move dims around: sum over a dim, transpose, reshape."""
    out: list[tuple[OpSpec, Shape]] = []
    for dim in range(len(shape)):
        rest = shape[:dim] + shape[dim + 1 :]
        out.append((OpSpec("sum_dim", f"{{0}}.sum(dim={dim})", _LINEAR, 1), rest))
    if len(shape) >= 2:
        swapped = (shape[1], shape[0]) + shape[2:]
        out.append((OpSpec("transpose", "{0}.transpose(0, 1)", _LINEAR, 1), swapped))
        merged = (shape[0] * shape[1],) + shape[2:]
        out.append((OpSpec("flatten", f"{{0}}.reshape({_tuple(merged)})", _LINEAR, 1), merged))
    if shape and shape[-1] % 2 == 0 and len(shape) < MAX_NDIM:
        split = shape[:-1] + (2, shape[-1] // 2)
        out.append((OpSpec("view", f"{{0}}.view({_tuple(split)})", _LINEAR, 1), split))
    return out


def _tuple(shape: Shape) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _pair_ops(a: Shape, b: Shape) -> list[tuple[OpSpec, Shape]]:
    """Two-operand ops that fit the shapes ``a`` and ``b``."""
    out: list[tuple[OpSpec, Shape]] = []
    if a == b:
        out += [(op, a) for op in _BINARY_SAME_SHAPE]
    if len(a) == 2 and len(b) == 2 and a[1] == b[0]:
        out.append((OpSpec("matmul", "{0} @ {1}", _mul(0, 1), 2), (a[0], b[1])))
        out.append((OpSpec("einsum_mm", "torch.einsum('ij,jk->ik', {0}, {1})", _mul(0, 1), 2), (a[0], b[1])))
    if len(a) == 2 and len(b) == 2 and a[1] == b[1]:
        out.append((OpSpec("einsum_nt", "torch.einsum('ij,kj->ik', {0}, {1})", _mul(0, 1), 2), (a[0], b[0])))
    if len(a) == 3 and len(b) == 2 and a[2] == b[0]:
        out.append((OpSpec("bmatmul", "torch.matmul({0}, {1})", _mul(0, 1), 2), (a[0], a[1], b[1])))
    return out


# --------------------------------------------------------------------------
# The tracker: the algebra's verdict, or a lenient guess after an error
# --------------------------------------------------------------------------

_LENIENT_ORDER = (Kind.P, Kind.V, Kind.R, Kind.I)
"""After an op error the tracker guesses the type the author believed in:
a Partial stays Partial, else Varying wins, else Replicate."""


def _local_types(op: OpSpec, operands: list[Value]) -> tuple[Types, frozenset[str]]:
    """The result's types of ``op`` on ``operands`` and the error codes it raises."""
    types, codes = [], set()
    for i, axis in enumerate(operands[0].mesh):
        args: list[core.Operand] = [v.types[i] for v in operands] + [core.SCALAR] * op.scalars
        if op.selector:
            args.append(None)  # an untyped selector: unknown on every axis
        free = [k in op.constants for k in range(len(args))]
        try:
            result = core.evaluate_without_gradients(op.expr, args, free, op.name, axis)
        except SpmdTypeError as err:
            codes.add(err.code.value)
            kinds = {v.types[i].kind for v in operands}
            result = AxisType(next(k for k in _LENIENT_ORDER if k in kinds))
        assert result is not None  # every operand is typed on every axis
        types.append(result)
    return tuple(types), frozenset(codes)


def _comm_codes(op: str, actual: AxisType, src: AxisType, dst: AxisType, axis: str, expert: bool) -> frozenset[str]:
    """Error codes of a collective/cast call on an input whose type is ``actual``."""
    codes = set()
    try:
        core.transition(op, src, dst, axis, expert)
    except SpmdTypeError as err:
        codes.add(err.code.value)
    try:
        core.check_source(op, src, actual, axis)
    except SpmdTypeError as err:
        codes.add(err.code.value)
    return frozenset(codes)


# --------------------------------------------------------------------------
# Shapes of collectives and casts (the V side stacks dim 0, S(i) concatenates dim i)
# --------------------------------------------------------------------------


def _gather_shape(shape: Shape, layout: AxisType, size: int) -> Optional[Shape]:
    """The whole from one part of ``size``: stack on a new dim 0 (V) or multiply dim i by ``size`` (S(i))."""
    if layout.shard is None:
        return (size,) + shape
    dim = layout.shard % len(shape)
    return shape[:dim] + (shape[dim] * size,) + shape[dim + 1 :]


def _scatter_shape(shape: Shape, layout: AxisType, size: int) -> Optional[Shape]:
    """One part of ``size``: unbind dim 0 (V) or divide dim i (S(i)); None if it does not split."""
    if layout.shard is None:
        return shape[1:] if shape and shape[0] == size else None
    dim = layout.shard % len(shape)
    if shape[dim] % size:
        return None
    return shape[:dim] + (shape[dim] // size,) + shape[dim + 1 :]


def comm_shape(op: str, src: AxisType, dst: AxisType, shape: Shape, size: int = AXIS_SIZE) -> Optional[Shape]:
    """The local result shape of a collective/cast on an axis of ``size`` ranks, None when the shape does
    not fit it."""
    if _needs_dim(src, shape) or _needs_dim(dst, shape):
        return None
    if op == "redistribute":
        step = core.route(src, dst)
        return shape if step is None else comm_shape(step.op, step.src, step.dst, shape, size)
    s, d = src.kind, dst.kind
    if op in ("all_gather",) or (op == "convert" and s is Kind.V and d is Kind.P):
        return _gather_shape(shape, src, size)
    if op == "reduce_scatter" or (op == "convert" and s in (Kind.R, Kind.I) and d is Kind.V):
        return _scatter_shape(shape, dst, size)
    if op == "all_to_all":
        # The local tensor is split on dst's dim (V: dim 0 of size the axis
        # size), the parts exchanged, and joined on src's dim.
        part = _scatter_shape(shape, dst, size)
        return None if part is None or _needs_dim(src, part) else _gather_shape(part, src, size)
    return shape


def _needs_dim(layout: AxisType, shape: Shape) -> bool:
    """A shard type names a dim the tensor must have."""
    return layout.shard is not None and not -len(shape) <= layout.shard < len(shape)


def _fits(shape: Optional[Shape]) -> bool:
    if shape is None or len(shape) > MAX_NDIM:
        return False
    numel = 1
    for size in shape:
        numel *= size
    return numel <= MAX_NUMEL


# --------------------------------------------------------------------------
# Candidate steps
# --------------------------------------------------------------------------

_FORMS = {
    Kind.R: [AxisType(Kind.R)],
    Kind.I: [AxisType(Kind.I)],
    Kind.P: [AxisType(Kind.P)],
    Kind.V: [AxisType(Kind.V), core.Shard(0), core.Shard(1), core.Shard(-1)],
}
_ALL_FORMS = [form for forms in _FORMS.values() for form in forms]
_OPS = (*core.COLLECTIVES, *core.CASTS, "redistribute")


@dataclass(frozen=True)
class Candidate:
    """A possible next step and what the tracker predicts for it."""

    make: Callable[[str], Statement]
    """The statement, given the target's name."""
    codes: frozenset[str]


def _comm_candidates(value: Value, axis_index: int, wild: bool) -> list[Candidate]:
    """Collectives/casts on one axis that fit the value's shape.

    Tame: ``src`` is the value's type and the pair is valid (expert_mode passed
    where needed). Wild: any src/dst form, valid or not, expert_mode a coin.
    """
    actual = value.types[axis_index]
    axis = value.mesh[axis_index]
    sources = _ALL_FORMS if wild else _FORMS[actual.kind]
    out = []
    for op in _OPS:
        for src in sources:
            for dst in _ALL_FORMS:
                shape = comm_shape(op, src, dst, value.shape, SIZES[axis])
                if not _fits(shape):
                    continue
                assert shape is not None
                for expert in (False, True) if wild and op in core.CASTS else (_gated(op, src, dst),):
                    codes = _comm_codes(op, actual, src, dst, axis, expert)
                    if wild or not codes:
                        types = value.types[:axis_index] + (dst,) + value.types[axis_index + 1 :]
                        out.append(Candidate(_comm_maker(value, op, axis, src, dst, expert, shape, types), codes))
    return out


def _gated(op: str, src: AxisType, dst: AxisType) -> bool:
    try:
        core.transition(op, src, dst, "tp", expert_mode=False)
    except SpmdTypeError as err:
        return err.code is core.Code.EXPERT_MODE
    return False


def _comm_maker(value: Value, op: str, axis: str, src: AxisType, dst: AxisType, expert: bool, shape: Shape, types: Types) -> Callable[[str], Statement]:
    return lambda name: Comm(Value(name, shape, types, value.mesh), op, value.name, axis, src, dst, expert)


def _local_candidates(pool: list[Value], wild: bool) -> list[Candidate]:
    """Ordinary ops on one or two live values that fit their shapes."""
    out = []
    for a in pool:
        unary = [(op, a.shape) for op in _UNARY] + _shape_ops(a.shape)
        if a.shape:
            unary.append((_SUM_ALL, ()))
        for op, shape in unary:
            out += _local_candidate(op, [a], shape, wild)
        for b in pool:
            for op, shape in _pair_ops(a.shape, b.shape):
                out += _local_candidate(op, [a, b], shape, wild)
    return out


def _local_candidate(op: OpSpec, operands: list[Value], shape: Shape, wild: bool,
                     selector: Selector | None = None) -> list[Candidate]:
    types, codes = _local_types(op, operands)
    if (codes and not wild) or not _fits(shape):
        return []
    names = [v.name for v in operands] + ([selector.name] if selector is not None else [])
    expression = op.template.format(*names)
    args = tuple(names)
    constants = bool(op.constants)
    mesh = operands[0].mesh
    return [Candidate(lambda name: Local(Value(name, shape, types, mesh), expression, args, constants), codes)]


# --------------------------------------------------------------------------
# Calls of module-level helpers (spmd_calls): V passed as P, groups, axes of size 1
# --------------------------------------------------------------------------

_PASSED_AS_P = (Kind.V, Kind.P)
"""What a parameter declared P accepts: a V or S(i) is the implicit reinterpret(V,P)."""


def _call_candidate(draw: st.DrawFn, value: Value, number: int, wild: bool) -> Optional[Candidate]:
    """A call of a new helper on ``value``: declared P on some axes, the argument's types (or nothing)
    on the others. Tame: P only where ``value`` is V, S(i) or P; wild: anywhere (R or I there is
    ``arg-type``), the group of the other axis (``arg-type``), the size of the other axis (``return-value``)."""
    accepted = [a for a, t in enumerate(value.types) if t.kind in _PASSED_AS_P]
    allowed = list(range(len(AXES))) if wild else accepted
    if not allowed:
        return None
    reduce = draw(st.sampled_from([None, *allowed]))
    partial = {reduce} if reduce is not None else set(draw(st.sets(st.sampled_from(allowed), min_size=1)))
    autograd, group = draw(st.booleans()), False
    size_one: Optional[str] = None
    codes = {"arg-type"} if partial - set(accepted) else set()
    group_axis: Optional[str] = None
    if reduce is not None:
        group = autograd = autograd and draw(st.booleans())
        if draw(st.booleans()):
            size_one = _maybe_other(draw, reduce, wild, codes, "return-value")
        if group:
            group_axis = _maybe_other(draw, reduce, wild, codes, "arg-type")
    param, result, types = [], [], []
    for a, (axis, t) in enumerate(zip(AXES, value.types)):
        declared = AxisType(Kind.P) if a in partial else t
        out = AxisType(Kind.I) if a == reduce else declared
        if a in partial or draw(st.booleans()):
            param.append((axis, declared))
            result.append((axis, out))
        types.append(out)
    stem = ("all_reduce" if reduce is not None else "as_partial") + f"_{number}"
    name = "_" + (stem.title().replace("_", "") if autograd else stem)
    helper = Helper(name, tuple(param), tuple(result), autograd, None if reduce is None else AXES[reduce], group, size_one)
    target_types = tuple(types)
    return Candidate(lambda target: Call(Value(target, value.shape, target_types), helper, value.name, group_axis),
                     frozenset(codes))


def _maybe_other(draw: st.DrawFn, axis_index: int, wild: bool, codes: set[str], code: str) -> str:
    """``AXES[axis_index]``, or in a wild program sometimes the other axis (adding ``code``)."""
    if wild and draw(st.integers(0, 2)) == 0:
        codes.add(code)
        return AXES[1 - axis_index]
    return AXES[axis_index]


# --------------------------------------------------------------------------
# Index selections with a typed index (docs/spec.md#select)
# --------------------------------------------------------------------------

_PICKS = Apply(Linearity.SELECT, Arg(1), Arg(0))
"""(data, index): the index picks from the data."""
_PICKS_SUM = Apply(Linearity.SELECT, Arg(1), Apply(Linearity.ADDITIVE, Arg(0), Arg(2)))
"""(data, index, source): the source's values land in the data at the index, the two parts summed."""
_INDEX_TYPES = [AxisType(Kind.R), AxisType(Kind.I), AxisType(Kind.V)]
"""What a typed index input is on an axis (a pending sum of indices means nothing)."""


def _index_op(name: str, template: str, expr: core.Expr = _PICKS) -> OpSpec:
    return OpSpec(name, template, expr, 2 if expr is _PICKS else 3, constants=(1,))


def _picked(shape: Shape) -> list[Shape]:
    """Index shapes for picking from a dim: one or three positions, or two rows of two."""
    return [(1,), (3,)] + ([(2, 2)] if len(shape) < MAX_NDIM else [])


def _index_uses(x: Value, index_shape: Optional[Shape], bound: Optional[int]) -> list[tuple[OpSpec, Shape, Shape, int]]:
    """The index ops on data ``x``: (op, index shape, result shape, index bound).

    With ``index_shape``/``bound`` (an index that exists) only the ops it fits, else every op with the
    index shape it needs. An op's result never has more than ``MAX_NDIM`` dims; the index's values
    lie in ``[0, bound)`` with ``bound`` at most the size of the dim it indexes.
    """
    out: list[tuple[OpSpec, Shape, Shape, int]] = []
    shape = x.shape

    def fits(wanted: Shape, size: int) -> bool:
        return index_shape is None or (index_shape == wanted and bound is not None and bound <= size)

    for dim, size in enumerate(shape):
        rest = shape[:dim], shape[dim + 1 :]
        selected: list[Shape] = [(1,), (3,)] if index_shape is None else [index_shape] if len(index_shape) == 1 else []
        for picks in selected:
            if fits(picks, size):
                op = _index_op("index_select", f"{{0}}.index_select({dim}, {{1}})")
                out.append((op, picks, rest[0] + picks + rest[1], bound or size))
        gathered = index_shape if index_shape is not None else shape[:dim] + (3,) + shape[dim + 1 :]
        if len(gathered) == len(shape) and all(g <= s for k, (g, s) in enumerate(zip(gathered, shape)) if k != dim) \
                and fits(gathered, size):
            out.append((_index_op("gather", f"torch.gather({{0}}, {dim}, {{1}})"), gathered, gathered, bound or size))
        # The index is shaped like the source (torch's backward of a larger source fails), the source like x.
        if fits(shape, size):
            op = _index_op("scatter_add", f"{{0}}.scatter_add({dim}, {{1}}, {{2}})", _PICKS_SUM)
            out.append((op, shape, shape, bound or size))
        if fits((size,), size):
            op = _index_op("index_add", f"{{0}}.index_add({dim}, {{1}}, {{2}})", _PICKS_SUM)
            out.append((op, (size,), shape, bound or size))
    if shape:
        shapes: list[Shape] = _picked(shape) if index_shape is None else [index_shape]
        for picks in shapes:
            if fits(picks, shape[0]):
                out.append((_index_op("getitem", "{0}[{1}]"), picks, picks + shape[1:], bound or shape[0]))
    return [use for use in out if _fits(use[2])]


def _index_makers(t: Value) -> list[tuple[OpSpec, Shape, int]]:
    """Indices computed from ``t`` (no gradient, ``t``'s type): (op, index shape, bound)."""
    if not t.shape or t.shape[-1] < 2:
        return []
    last, rest = t.shape[-1], t.shape[:-1]
    nonlinear = Apply(Linearity.NONLINEAR, Arg(0))
    # No 0-dim index (argmax of a vector): x[i] reads its value as a Python int, one per rank in the
    # simulated world, which it cannot give.
    argmax = [(OpSpec("argmax", "{0}.argmax(dim=-1)", nonlinear, 1), rest, last)] if rest else []
    return argmax + [
        (OpSpec("argmax_keepdim", "{0}.argmax(dim=-1, keepdim=True)", nonlinear, 1), rest + (1,), last),
        (OpSpec("topk_indices", f"{{0}}.topk({last // 2}, dim=-1).indices", nonlinear, 1), rest + (last // 2,), last),
    ]


def _topk_values(x: Value) -> list[tuple[OpSpec, Shape]]:
    """``topk(k).values`` along the last dim: nonlinear, the data's type."""
    if not x.shape or x.shape[-1] < 2:
        return []
    k = x.shape[-1] // 2
    return [(OpSpec("topk_values", f"{{0}}.topk({k}, dim=-1).values", Apply(Linearity.NONLINEAR, Arg(0)), 1),
             x.shape[:-1] + (k,))]


def _index_input_types(draw: st.DrawFn, op: OpSpec, operands: list[Value], index: Value, wild: bool) -> Optional[Types]:
    """A type per axis for a new index input: any of R, I, V where ``wild``, else one the rules accept."""
    options = [types for types in itertools.product(_INDEX_TYPES, repeat=len(AXES))
               if wild or not _local_types(op, _with_index(operands, Value(index.name, index.shape, types)))[1]]
    return draw(st.sampled_from(options)) if options else None


def _with_index(operands: list[Value], index: Value) -> list[Value]:
    """The operands in the op's order: data, index, then the source of a scatter."""
    return operands[:1] + [index] + operands[1:]


# --------------------------------------------------------------------------
# The uneven all_to_all (docs/spec.md#exchanging-rows-by-counts)
# --------------------------------------------------------------------------

_NOT_VARYING_ON_AXIS = (Kind.R, Kind.I, Kind.P)


def _exchange_candidates(value: Value, axis_index: int, counts: RowCounts, wild: bool) -> list[Candidate]:
    """The uneven exchange of ``value``'s rows on one axis, by the counts input ``counts``.

    Tame: ``src=V, dst=V`` on a value that varies there (V or S(i)), where on every other axis the
    counts are R or the rows V or R (then V). Wild also: on an R, I or P value, declaring ``src=S(0),
    dst=S(0)``, or with I or P rows where the counts vary; the checker must reject those
    (``spmd-collective``).
    """
    actual, axis = value.types[axis_index], AXES[axis_index]
    if not value.shape:
        return []
    forms = [(Varying, Varying)] + ([(core.Shard(0), core.Shard(0))] if wild else [])
    out = []
    for src, dst in forms:
        try:
            check_row_exchange(src, dst, axis, actual)
            codes: frozenset[str] = frozenset()
        except SpmdTypeError as err:
            codes = frozenset({err.code.value})
        types: list[AxisType] = []
        for index, (row, counted) in enumerate(zip(value.types, counts.types)):
            try:
                types.append(Varying if index == axis_index else row_exchange_elsewhere(row, AXES[index], axis, counted))
            except SpmdTypeError as err:
                codes |= {err.code.value}
                types.append(Varying)
        if codes and not wild:
            continue
        statement = Comm(Value("_", value.shape, tuple(types)), "all_to_all", value.name, axis, src, dst, False,
                         counts.name)
        out.append(Candidate(functools.partial(_renamed, statement), codes))
    return out


def _renamed(statement: Comm, name: str) -> Comm:
    target = statement.target
    return Comm(Value(name, target.shape, target.types), statement.op, statement.arg, statement.axis,
                statement.src, statement.dst, statement.expert, statement.counts)


# --------------------------------------------------------------------------
# The strategy
# --------------------------------------------------------------------------

_DIMS = st.sampled_from([2, 4])


@st.composite
def input_values(draw: st.DrawFn, index: int) -> Value:
    """An input with a random shape and a random type (R, I, V, P, S(i)) per axis."""
    shape = tuple(draw(st.lists(_DIMS, min_size=1, max_size=3)))
    types = tuple(draw(st.sampled_from([f for f in _ALL_FORMS if not _needs_dim(f, shape)])) for _ in AXES)
    return Value(f"x{index}", shape, types)


@dataclass
class _Draft:
    """A program being drawn: its live values, statements, predicted codes and extra inputs."""

    wild: bool
    pool: list[Value]
    body: list[Statement] = field(default_factory=list)
    predicted: set[str] = field(default_factory=set)
    selectors: list[Selector] = field(default_factory=list)
    indices: list[Index] = field(default_factory=list)
    counts: list[RowCounts] = field(default_factory=list)
    made: list[Index] = field(default_factory=list)
    """Indices computed in the body (never data: they are not in ``pool``)."""
    on_ep: list[Value] = field(default_factory=list)
    """Live values moved to ``EP`` and computed there: a pool of their own (``pool`` is on ``AXES``)."""
    features: set[str] = field(default_factory=set)

    def next_name(self) -> str:
        return f"t{len(self.body)}"

    def add(self, statement: Statement, codes: frozenset[str], data: bool = True) -> Value:
        self.body.append(statement)
        self.predicted.update(codes)
        if data:
            self.pool.append(statement.target)
        return statement.target


@st.composite
def programs(draw: st.DrawFn, max_steps: int = 6, helpers: bool = False, extended: bool = False) -> Program:
    """A typed program; about one in three is wild (may contain type errors).

    ``helpers``: some steps call module-level helpers (:class:`Call`). Off, the
    draws are those of the programs before helpers existed (the hint harness,
    which reads a program back from its body alone, draws those).
    ``extended``: one step in eight is an index op with a typed or computed
    index, one in eight an uneven ``all_to_all``, one in eight a move to the
    flattened axis ``ep`` and steps there (:func:`spmd_meshes.mesh_step`), the
    loss then sometimes finished on ep; off, the draws are those of the
    programs before these existed.
    """
    from spmd_meshes import mesh_step  # it builds on this module's steps

    wild = draw(st.integers(0, 2)) == 2
    inputs = [draw(input_values(i)) for i in range(draw(st.integers(1, 3)))]
    draft = _Draft(wild, list(inputs))
    pool = draft.pool

    def step(candidates: list[Candidate]) -> Value:
        chosen = draw(st.sampled_from(candidates))
        return draft.add(chosen.make(draft.next_name()), chosen.codes)

    def select(value: Value) -> None:
        """A SELECT op on ``value`` with a new untyped selector input."""
        options = _select_ops(value.shape)
        if not options:
            return
        op, indices, bound, result = draw(st.sampled_from(options))
        varies = tuple(t.kind is Kind.V and draw(st.booleans()) for t in value.types)
        selector = Selector(f"s{len(draft.selectors)}", indices, bound, varies)
        candidates = _local_candidate(op, [value], result, wild, selector)
        if candidates:
            draft.selectors.append(selector)
            step(candidates)

    for _ in range(draw(st.integers(0, max_steps))):
        family = draw(st.integers(0, 7)) if extended else None
        if helpers and draw(st.integers(0, 4)) == 0:
            call = _call_candidate(draw, draw(st.sampled_from(pool)), len(draft.body), wild)
            if call is not None:
                step([call])
        elif family == 0:
            _index_step(draw, draft, draw(st.sampled_from(pool)))
        elif family == 1:
            _exchange_step(draw, draft, draw(st.sampled_from(pool)), draw(st.integers(0, len(AXES) - 1)))
        elif family == 2:
            mesh_step(draw, draft)
        elif draw(st.integers(0, 4)) == 0:
            select(draw(st.sampled_from(pool)))
        elif draw(st.booleans()):
            step(_local_candidates(pool, wild))
        else:
            value = draw(st.sampled_from(pool))
            candidates = _comm_candidates(value, draw(st.integers(0, len(AXES) - 1)), wild)
            if candidates:
                step(candidates)
    # Usually the last value, so that most of the body feeds the loss.
    losses = draft.on_ep if draft.on_ep and draw(st.booleans()) else pool
    loss = losses[-1] if draw(st.booleans()) else draw(st.sampled_from(losses))
    if loss.mesh != AXES:
        draft.features.add("mesh transition, loss on ep")
    loss = _to_scalar(loss, step)
    for axis_index in range(len(loss.mesh)):
        # A finished loss is I or P on the axis; leaving it be is sometimes
        # right (it already is) and sometimes an error the checker must see.
        if draw(st.integers(0, 5)) > 0 or not wild:
            loss = _finish(loss, axis_index, step, wild)
    loss = _to_scalar(loss, step)
    predicted = frozenset(draft.predicted | _loss_codes(loss))
    return Program(tuple(inputs), tuple(draft.body), loss, predicted, tuple(draft.selectors), tuple(draft.indices),
                   tuple(draft.counts), frozenset(draft.features))


def _index_step(draw: st.DrawFn, draft: _Draft, x: Value) -> None:
    """An index op on the data ``x``: ``topk(...).values``, or an op whose index is a new typed input, a
    new index computed from a live value, or one computed earlier."""
    source = draw(st.integers(0, 3))
    if source == 0:
        for op, shape in _topk_values(x):
            for chosen in _local_candidate(op, [x], shape, draft.wild):
                draft.add(chosen.make(draft.next_name()), chosen.codes)
                draft.features.add("topk values")
        return
    maker: Optional[Local] = None
    maker_codes: frozenset[str] = frozenset()
    if source == 1:
        # Half the time from the data itself (gather the top-k of a row), else from any live value.
        t = x if draw(st.booleans()) else draw(st.sampled_from(draft.pool))
        makers = _index_makers(t)
        if not makers:
            return
        op, shape, bound = draw(st.sampled_from(makers))
        types, maker_codes = _local_types(op, [t])
        if maker_codes and not draft.wild:
            return
        index = Index(draft.next_name(), shape, bound, types)
        maker = Local(Value(index.name, shape, types), op.template.format(t.name), (t.name,))
        origin = f"index computed by {op.name}"
    elif source == 2 and draft.made:
        index = draw(st.sampled_from(draft.made))
        origin = "index computed earlier"
    else:
        index = Index(f"i{len(draft.indices)}", (), 0, ())
        origin = "index typed input"
    known = index.types != ()
    uses = _index_uses(x, index.shape if known else None, index.bound if known else None)
    if not uses:
        return
    op, index_shape, result, bound = draw(st.sampled_from(uses))
    operands = [x]
    if op.arity == 3:
        operands.append(draw(st.sampled_from([v for v in draft.pool if v.shape == x.shape])))
    if not known:
        drawn = _index_input_types(draw, op, operands, Value(index.name, index_shape, ()), draft.wild)
        if drawn is None:
            return
        index = Index(index.name, index_shape, bound, drawn)
    name = draft.next_name() if maker is None else f"t{len(draft.body) + 1}"
    candidates = _local_candidate(op, _with_index(operands, Value(index.name, index.shape, index.types)), result, draft.wild)
    if not candidates:
        return
    if maker is not None:
        draft.add(maker, maker_codes, data=False)
        draft.made.append(index)
    elif not known:
        draft.indices.append(index)
    draft.add(candidates[0].make(name), candidates[0].codes)
    draft.features.update({op.name, origin})


def _exchange_step(draw: st.DrawFn, draft: _Draft, value: Value, axis_index: int) -> None:
    """An uneven ``all_to_all`` of ``value``'s rows on one axis, with a new row counts input."""
    types = tuple(Varying if a == axis_index else draw(st.sampled_from([Replicate, Varying])) for a in range(len(AXES)))
    counts = RowCounts(f"n{len(draft.counts)}", AXES[axis_index], value.shape[0] if value.shape else 0, types)
    candidates = _exchange_candidates(value, axis_index, counts, draft.wild)
    if not candidates:
        return
    chosen = draw(st.sampled_from(candidates))
    draft.counts.append(counts)
    draft.add(chosen.make(draft.next_name()), chosen.codes)
    declared = draft.body[-1]
    assert isinstance(declared, Comm)
    if declared.src.shard is not None:
        draft.features.add("uneven all_to_all declared S(0)")
    elif value.types[axis_index].kind in _NOT_VARYING_ON_AXIS:
        draft.features.add("uneven all_to_all of R, I or P")
    else:
        draft.features.add("uneven all_to_all")
    if any(c.kind is Kind.V and t.kind is not Kind.V for c, t in zip(types, value.types)):
        draft.features.add(UNEVEN_COUNTS_VARY_WHERE_ROWS_DO_NOT)


def _to_scalar(value: Value, step: Callable[[list[Candidate]], Value]) -> Value:
    if not value.shape:
        return value
    return step(_local_candidate(_SUM_ALL, [value], (), wild=True))


def _finish(loss: Value, axis_index: int, step: Callable[[list[Candidate]], Value], wild: bool) -> Value:
    """A cast/collective to I or P on the axis (or nothing when it already is one)."""
    if loss.types[axis_index].kind in (Kind.I, Kind.P):
        return loss
    candidates = [
        c for c in _comm_candidates(loss, axis_index, wild=False) if _dst_kind(c) in (Kind.I, Kind.P)
    ]
    return step(candidates) if candidates else loss


def _dst_kind(candidate: Candidate) -> Kind:
    statement = candidate.make("_")
    assert isinstance(statement, Comm)
    return statement.dst.kind


def _loss_codes(loss: Value) -> frozenset[str]:
    bad = any(t.kind not in (Kind.I, Kind.P) for t in loss.types)
    return frozenset({core.Code.BACKWARD.value}) if bad else frozenset()


def draw(count: int, seed_value: int, helpers: bool = False, extended: bool = False) -> list[Program]:
    """``count`` programs drawn by hypothesis from ``seed_value`` (the same ones every time; no
    shrinking: a script or test judges them itself); ``helpers`` and ``extended`` as for :func:`programs`."""
    drawn: list[Program] = []

    @seed(seed_value)
    @settings(max_examples=count, deadline=None, database=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(programs(helpers=helpers, extended=extended))
    def keep(program: Program) -> None:
        drawn.append(program)

    keep()
    return drawn
