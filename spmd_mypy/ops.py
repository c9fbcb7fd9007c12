"""The op table: every modelled torch op, as an algebra expression.

An op's operands are numbered as its call binds them: for a ``Tensor``
method the receiver is operand 0 and the method's parameters follow
(``x.add(y)``: x=0, y=1); for a function its parameters in order
(``torch.add(input, other)``: 0, 1; ``F.linear(input, weight, bias)``: 0, 1,
2).  A parameter the expression does not mention (``dim``, ``dtype``) is not
an operand.  :class:`Variadic` ops take every tensor of one parameter (a list
for ``cat``, ``*operands`` for ``einsum``) and those after it; arguments that
are never tensors there (``cat``'s ``dim``, ``einsum``'s equation) are not
operands.

Composite ops are decompositions (DESIGN section 2): ``linear(x, w, b)`` is
``x @ w.T + b``, ``addmm(b, m1, m2)`` is ``b + m1 @ m2``, ``layer_norm(x, s,
w, b)`` is ``normalise(x) * w + b``, ``scaled_dot_product_attention(q, k, v,
mask)`` is ``softmax(q k^T, mask) @ v``.

In-place variants (``add_``, ``__iadd__``) and ``out=`` share the entry of
their out-of-place op; :mod:`spmd_mypy.inference` adds the in-place rule.
Ops missing from the table give unknown results (reported in strict mode).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from spmd_stubs.core import Apply, Arg, Effect, Expr, Linearity, Monotone

LINEAR, NONLINEAR = Linearity.LINEAR, Linearity.NONLINEAR
ADDITIVE, MULTILINEAR, SELECT = Linearity.ADDITIVE, Linearity.MULTILINEAR, Linearity.SELECT


@dataclass(frozen=True)
class Variadic:
    """``linearity`` over every tensor operand from parameter ``start`` on.

    Arguments that are never tensors (python numbers, strings, index lists)
    are the op's parameters, not operands: ``einsum``'s equation, ``cat``'s
    and ``softmax``'s ``dim``.  They are left out of the judgement (a ``dim``
    is no term of ``cat``'s sum) and of the messages.
    """

    linearity: Linearity
    start: int = 0


Rule = Union[Expr, Variadic]

UNARY_LINEAR = Apply(LINEAR, Arg(0))
BINARY_ADD = Apply(ADDITIVE, Arg(0), Arg(1))
BINARY_MUL = Apply(MULTILINEAR, Arg(0), Arg(1))
ALL_NONLINEAR = Variadic(NONLINEAR)
DIVIDE = Apply(MULTILINEAR, Arg(0), Apply(NONLINEAR, Arg(1)))
REFLECTED_DIVIDE = Apply(MULTILINEAR, Arg(1), Apply(NONLINEAR, Arg(0)))
INDEX = Apply(SELECT, Arg(1), Arg(0))
"""``x[idx]``: the index selects from the data (operand 0)."""
GATHER = Apply(SELECT, Arg(2), Arg(0))
"""``gather(x, dim, index)`` / ``index_select(x, dim, index)``."""
MASKED_FILL = Apply(SELECT, Arg(1), Apply(ADDITIVE, Arg(0), Arg(2)))
"""``masked_fill(x, mask, value)``: the fill value meets every rank's part."""
WHERE = Apply(SELECT, Arg(0), Apply(ADDITIVE, Arg(1), Arg(2)))
LINEAR_LAYER = Apply(ADDITIVE, Apply(MULTILINEAR, Arg(0), Arg(1)), Arg(2))
ADDMM = Apply(ADDITIVE, Arg(0), Apply(MULTILINEAR, Arg(1), Arg(2)))
LAYER_NORM = Apply(ADDITIVE, Apply(MULTILINEAR, Apply(NONLINEAR, Arg(0)), Arg(2)), Arg(3))
RMS_NORM = Apply(MULTILINEAR, Apply(NONLINEAR, Arg(0)), Arg(2))
ATTENTION = Apply(MULTILINEAR, Apply(NONLINEAR, Arg(0), Arg(1), Arg(3)), Arg(2))
EMBEDDING = Apply(SELECT, Arg(0), Arg(1))
"""``embedding(input, weight)``: the token ids select rows of the weight."""

_LINEAR_NAMES = """
clone detach contiguous view view_as reshape reshape_as flatten unflatten squeeze unsqueeze
transpose t permute movedim moveaxis swapaxes swapdims expand expand_as repeat repeat_interleave
tile narrow select chunk split tensor_split unbind flip fliplr flipud roll rot90 sum mean nansum
cumsum diagonal diag diag_embed tril triu trace float half double bfloat16 to type type_as cuda
cpu real imag conj neg negative __neg__ __pos__ positive ravel as_strided
unfold pad adaptive_avg_pool1d avg_pool1d avg_pool2d requires_grad_ pin_memory
""".split()

_NONLINEAR_NAMES = """
exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh
atanh sigmoid logit relu relu6 gelu silu mish elu selu celu leaky_relu hardtanh hardswish
hardsigmoid softplus softsign tanhshrink threshold glu softmax log_softmax softmin sqrt rsqrt
abs absolute square pow float_power reciprocal sign sgn signbit floor ceil round trunc frac fmod
remainder clamp clip clamp_min clamp_max erf erfc erfinv max min amax amin maximum minimum fmax fmin
argmax argmin argsort sort topk kthvalue median mode norm var std var_mean std_mean logsumexp
logcumsumexp cumprod prod any all isnan isinf isfinite isclose allclose equal eq ne lt le gt ge
greater less greater_equal less_equal not_equal logical_and logical_or logical_not logical_xor
bitwise_and bitwise_or bitwise_xor bitwise_not nan_to_num dropout dropout1d dropout2d
alpha_dropout feature_alpha_dropout group_norm batch_norm instance_norm local_response_norm
normalize cross_entropy nll_loss mse_loss l1_loss smooth_l1_loss huber_loss kl_div
binary_cross_entropy binary_cross_entropy_with_logits cosine_similarity pairwise_distance
__pow__ __rpow__ __lt__ __le__ __gt__ __ge__ __eq__ __ne__ __and__ __rand__ __or__ __ror__
__xor__ __rxor__ __invert__ __floordiv__ __rfloordiv__ __mod__ __rmod__ __abs__ floor_divide
count_nonzero unique bincount histc one_hot
""".split()

_BINARY_ADD_NAMES = "add sub subtract __add__ __radd__ __sub__ __rsub__ rsub lerp".split()
_BINARY_MUL_NAMES = """
mul multiply __mul__ __rmul__ matmul __matmul__ __rmatmul__ mm bmm mv dot vdot inner outer ger
kron tensordot cross
""".split()

TABLE: dict[str, Rule] = {
    **{name: UNARY_LINEAR for name in _LINEAR_NAMES},
    **{name: ALL_NONLINEAR for name in _NONLINEAR_NAMES},
    **{name: BINARY_ADD for name in _BINARY_ADD_NAMES},
    **{name: BINARY_MUL for name in _BINARY_MUL_NAMES},
    "div": DIVIDE,
    "divide": DIVIDE,
    "true_divide": DIVIDE,
    "__truediv__": DIVIDE,
    "__rtruediv__": REFLECTED_DIVIDE,
    "__getitem__": INDEX,
    "gather": GATHER,
    "index_select": GATHER,
    "take_along_dim": Apply(SELECT, Arg(1), Arg(0)),
    "masked_select": Apply(SELECT, Arg(1), Arg(0)),
    "masked_fill": MASKED_FILL,
    "where": WHERE,
    "cat": Variadic(ADDITIVE),
    "concat": Variadic(ADDITIVE),
    "concatenate": Variadic(ADDITIVE),
    "stack": Variadic(ADDITIVE),
    "hstack": Variadic(ADDITIVE),
    "vstack": Variadic(ADDITIVE),
    "dstack": Variadic(ADDITIVE),
    "einsum": Variadic(MULTILINEAR),  # einsum(equation, *operands): the equation is no operand
    "chain_matmul": Variadic(MULTILINEAR),
    "linear": LINEAR_LAYER,
    "bilinear": Apply(ADDITIVE, Apply(MULTILINEAR, Arg(0), Arg(1), Arg(2)), Arg(3)),
    "addmm": ADDMM,
    "addbmm": ADDMM,
    "baddbmm": ADDMM,
    "addmv": ADDMM,
    "addcmul": Apply(ADDITIVE, Arg(0), Apply(MULTILINEAR, Arg(1), Arg(2))),
    "addcdiv": Apply(ADDITIVE, Arg(0), Apply(MULTILINEAR, Arg(1), Apply(NONLINEAR, Arg(2)))),
    "layer_norm": LAYER_NORM,
    "rms_norm": RMS_NORM,
    "scaled_dot_product_attention": ATTENTION,
    "embedding": EMBEDDING,
}

INCREASING, DECREASING, MOVES = Monotone.INCREASING, Monotone.DECREASING, Monotone.MOVES

_MOVES_NAMES = """
clone detach contiguous view view_as reshape reshape_as flatten unflatten squeeze unsqueeze transpose t
permute movedim moveaxis swapaxes swapdims expand expand_as repeat repeat_interleave tile narrow select
chunk split tensor_split unbind flip fliplr flipud roll rot90 diagonal ravel unfold __getitem__ gather
index_select take_along_dim masked_select cat concat concatenate stack hstack vstack dstack to float half
double bfloat16 type type_as cuda cpu requires_grad_ pin_memory T mT H mH data
""".split()

_INCREASING_NAMES = """
exp exp2 expm1 log log2 log10 log1p sigmoid tanh relu relu6 elu selu celu leaky_relu silu softplus sqrt
atan asinh sinh erf hardtanh hardsigmoid clamp clip clamp_min clamp_max floor ceil round trunc
add __add__ __radd__
""".split()

EFFECTS: dict[str, Effect] = {
    **{name: MOVES for name in _MOVES_NAMES},
    **{name: INCREASING for name in _INCREASING_NAMES},
    **{name: DECREASING for name in ("neg", "negative", "__neg__")},
    **{name: (INCREASING, DECREASING) for name in ("sub", "subtract", "__sub__")},
    **{name: (DECREASING, INCREASING) for name in ("__rsub__", "rsub")},
    "amax": Monotone.MAX,
    "amin": Monotone.MIN,
}
"""What each op does to a pending max/min (:class:`~spmd_stubs.core.Monotone`).

Only these ops may keep a ``Pmax``/``Pmin`` operand; every other op on one is
an error.  ``max(dim)``/``min(dim)`` are left out: they also return indices,
which a pending extremum cannot give.
"""

TENSOR_ATTRIBUTES: dict[str, Rule] = {name: UNARY_LINEAR for name in ("T", "mT", "H", "mH", "data")}
"""Tensor properties that are views of the tensor (``w.T``)."""

CONSTANT_FACTORIES = frozenset(
    "zeros ones full empty zeros_like ones_like full_like empty_like arange linspace logspace eye tensor"
    " as_tensor scalar_tensor".split()
)
"""Fixed-value factories: the same value on every rank, so R on every axis where
such a call is an operand (its result, once stored, is unknown)."""

RANDOM_FACTORIES = frozenset("rand randn randint randperm rand_like randn_like randint_like normal bernoulli".split())
"""Random factories: modelled as unknown (the value depends on each rank's RNG state)."""

FUNCTION_MODULES = ("torch._C._VariableFunctions.", "torch._C._nn.", "torch.nn.functional.", "torch.functional.")
"""Where torch's op functions are defined (what mypy resolves ``torch.add`` to)."""

METHOD_PREFIX = "torch._tensor.Tensor."
ATTRIBUTE_PREFIX = "torch._C.TensorBase."

_INPLACE_DUNDERS = {f"__i{name}__": f"__{name}__" for name in "add sub mul matmul truediv floordiv mod pow and or xor".split()}


def out_of_place(name: str) -> tuple[str, bool]:
    """``add_`` -> ``("add", True)``, ``__iadd__`` -> ``("__add__", True)``, ``add`` -> ``("add", False)``."""
    if name in _INPLACE_DUNDERS:
        return _INPLACE_DUNDERS[name], True
    if name.endswith("_") and not name.endswith("__") and name[:-1] in TABLE:
        return name[:-1], True
    return name, False


def rule_for(name: str) -> Rule | None:
    return TABLE.get(out_of_place(name)[0])


def effect_for(name: str) -> Effect:
    return EFFECTS.get(out_of_place(name)[0])


# --------------------------------------------------------------------------
# Shape behaviour (global SPMD): which dims an op keeps, moves, reduces or acts along
# --------------------------------------------------------------------------

REQUIRED = object()
"""A shape parameter without a default: a call that does not pass it statically has no rule."""


@dataclass(frozen=True)
class Shape:
    """How an op treats tensor dims, for shard propagation (:mod:`spmd_stubs.sharding`).

    ``kind`` names the behaviour; ``params`` are the op's parameters that give
    its dims, as ``(name, default)`` (``REQUIRED``: no default); ``partial``
    is the pending reduction an ``out_partial_axes`` call leaves on a reduced
    sharded dim (``sum`` for sum, ``max`` for amax), None where the op has
    no ``spmd.*`` form with ``out_partial_axes``.
    """

    kind: str
    params: tuple[tuple[str, object], ...] = ()
    partial: str | None = None


POINTWISE = Shape("pointwise")
_DIM0 = (("dim", 0),)
_REDUCE = (("dim", None), ("keepdim", False))

_POINTWISE_NAMES = """
clone detach contiguous float half double bfloat16 to type type_as cuda cpu real imag conj neg negative
__neg__ __pos__ positive requires_grad_ pin_memory data
exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh
sigmoid logit relu relu6 gelu silu mish elu selu celu leaky_relu hardtanh hardswish hardsigmoid softplus
softsign tanhshrink threshold sqrt rsqrt abs absolute square pow float_power reciprocal sign sgn signbit
floor ceil round trunc frac fmod remainder clamp clip clamp_min clamp_max erf erfc erfinv maximum minimum
fmax fmin isnan isinf isfinite eq ne lt le gt ge greater less greater_equal less_equal not_equal
logical_and logical_or logical_not logical_xor bitwise_and bitwise_or bitwise_xor bitwise_not nan_to_num
dropout dropout1d dropout2d alpha_dropout feature_alpha_dropout
__pow__ __rpow__ __lt__ __le__ __gt__ __ge__ __eq__ __ne__ __and__ __rand__ __or__ __ror__ __xor__ __rxor__
__invert__ __floordiv__ __rfloordiv__ __mod__ __rmod__ __abs__ floor_divide
add sub subtract __add__ __radd__ __sub__ __rsub__ rsub lerp mul multiply __mul__ __rmul__
div divide true_divide __truediv__ __rtruediv__ masked_fill where addcmul addcdiv
""".split()

SHAPES: dict[str, Shape] = {
    **{name: POINTWISE for name in _POINTWISE_NAMES},
    # contractions (einsum's rule, seed 000)
    "matmul": Shape("matmul", partial="sum"),
    "__matmul__": Shape("matmul", partial="sum"),
    "__rmatmul__": Shape("rmatmul"),
    "mm": Shape("mm", partial="sum"),
    "bmm": Shape("bmm", partial="sum"),
    "mv": Shape("mv"),
    "dot": Shape("dot"),
    "vdot": Shape("dot"),
    "outer": Shape("outer"),
    "ger": Shape("outer"),
    "einsum": Shape("einsum", partial="sum"),
    "linear": Shape("linear", partial="sum"),
    "scaled_dot_product_attention": Shape("attention"),
    # reductions over dims
    "sum": Shape("reduce", _REDUCE, partial="sum"),
    "nansum": Shape("reduce", _REDUCE, partial="sum"),
    "mean": Shape("reduce", _REDUCE),
    "amax": Shape("reduce", _REDUCE, partial="max"),
    "amin": Shape("reduce", _REDUCE, partial="min"),
    "max": Shape("reduce_or_pointwise", _REDUCE),
    "min": Shape("reduce_or_pointwise", _REDUCE),
    "prod": Shape("reduce", _REDUCE),
    "logsumexp": Shape("reduce", (("dim", REQUIRED), ("keepdim", False))),
    "var": Shape("reduce", _REDUCE),
    "std": Shape("reduce", _REDUCE),
    "argmax": Shape("reduce", _REDUCE),
    "argmin": Shape("reduce", _REDUCE),
    "any": Shape("reduce", _REDUCE),
    "all": Shape("reduce", _REDUCE),
    "count_nonzero": Shape("reduce", (("dim", None),)),
    "median": Shape("reduce", _REDUCE),
    "kthvalue": Shape("reduce", (("dim", -1), ("keepdim", False))),
    "select": Shape("reduce", (("dim", REQUIRED),)),
    "unbind": Shape("reduce", _DIM0),
    # computing along a dim
    "softmax": Shape("along", (("dim", REQUIRED),)),
    "log_softmax": Shape("along", (("dim", REQUIRED),)),
    "softmin": Shape("along", (("dim", REQUIRED),)),
    "cumsum": Shape("along", (("dim", REQUIRED),)),
    "cumprod": Shape("along", (("dim", REQUIRED),)),
    "logcumsumexp": Shape("along", (("dim", REQUIRED),)),
    "sort": Shape("along", (("dim", -1),)),
    "argsort": Shape("along", (("dim", -1),)),
    "topk": Shape("along", (("dim", -1),)),
    "flip": Shape("along", (("dims", REQUIRED),)),
    "narrow": Shape("along", (("dim", REQUIRED),)),
    "chunk": Shape("along", _DIM0),
    "split": Shape("along", _DIM0),
    "tensor_split": Shape("along", _DIM0),
    "index_select": Shape("along", (("dim", REQUIRED),)),
    "glu": Shape("along", (("dim", -1),)),
    "normalize": Shape("along", (("dim", 1),)),
    "tril": Shape("along_last_two"),
    "triu": Shape("along_last_two"),
    "layer_norm": Shape("along_trailing", (("normalized_shape", REQUIRED),)),
    "rms_norm": Shape("along_trailing", (("normalized_shape", REQUIRED),)),
    # moving dims
    "transpose": Shape("transpose", (("dim0", REQUIRED), ("dim1", REQUIRED))),
    "swapaxes": Shape("transpose", (("axis0", REQUIRED), ("axis1", REQUIRED))),
    "swapdims": Shape("transpose", (("dim0", REQUIRED), ("dim1", REQUIRED))),
    "t": Shape("matrix_transpose"),
    "T": Shape("matrix_transpose"),
    "H": Shape("matrix_transpose"),
    "mT": Shape("last_two_transpose"),
    "mH": Shape("last_two_transpose"),
    "permute": Shape("permute", (("dims", REQUIRED),)),
    "movedim": Shape("movedim", (("source", REQUIRED), ("destination", REQUIRED))),
    "moveaxis": Shape("movedim", (("source", REQUIRED), ("destination", REQUIRED))),
    "unsqueeze": Shape("unsqueeze", (("dim", REQUIRED),)),
    "squeeze": Shape("squeeze", (("dim", None),)),
    "flatten": Shape("flatten", (("start_dim", 0), ("end_dim", -1))),
    "ravel": Shape("flatten"),
    "view": Shape("view", (("size", REQUIRED),)),
    "reshape": Shape("view", (("shape", REQUIRED),)),
    "cat": Shape("cat", _DIM0),
    "concat": Shape("cat", _DIM0),
    "concatenate": Shape("cat", (("axis", 0),)),
    "stack": Shape("stack", _DIM0),
}
"""Op name -> shape behaviour.  An op of :data:`TABLE` missing here has no shard
propagation rule: in global SPMD a sharded operand is an error (use local_map)."""


def shape_for(name: str) -> Shape | None:
    return SHAPES.get(out_of_place(name)[0])
