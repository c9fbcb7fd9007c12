"""The op table: one record per modelled torch op (docs/spec.md#local-rules).

Each line is one op, or a word list of ops that share every fact; ``a/b``
spells one op two ways (``neg/negative/__neg__``).  Adding or fixing an op
is one line here.

An op's operands are numbered as its call binds them: for a ``Tensor``
method the receiver is operand 0 and the method's parameters follow
(``x.add(y)``: x=0, y=1); for a function its parameters in order
(``torch.add(input, other)``: 0, 1; ``F.linear(input, weight, bias)``: 0, 1,
2).  A parameter the rule does not mention (``dim``, ``dtype``) is not an
operand.  :class:`~spmd_stubs.core.torch_ops.record.Variadic` ops take every
tensor of one parameter (a list for ``cat``, ``*operands`` for ``einsum``)
and those after it.

Composite ops are decompositions: ``linear(x, w, b)`` is ``x @ w.T + b``,
``addmm(b, m1, m2)`` is ``b + m1 @ m2``, ``layer_norm(x, s, w, b)`` is
``normalise(x) * w + b``, ``scaled_dot_product_attention(q, k, v, mask)`` is
``softmax(q k^T, mask) @ v``.
"""

from __future__ import annotations

from spmd_stubs.core.rules import Apply, Arg, Effect, Linearity, Monotone
from spmd_stubs.core.sharding.errors import EINSUM_FORM, SpmdForm  # the package would load propagation
from spmd_stubs.core.torch_ops.record import REQUIRED, Op, Rule, ShapeRule, Variadic
from spmd_stubs.core.torch_ops.shapes import (
    ALONG_LAST_TWO,
    ALONG_TRAILING,
    ATTENTION,
    EINSUM,
    FLATTEN,
    LAST_TWO_TRANSPOSE,
    LINEAR,
    MATMUL,
    MATRIX_TRANSPOSE,
    MOVEDIM,
    PERMUTE,
    POINTWISE,
    REDUCE_OR_POINTWISE,
    RMATMUL,
    SQUEEZE,
    STACK,
    UNSQUEEZE,
    along,
    cat,
    matmul_of,
    new_shape,
    reduce,
    transpose,
)

NONLINEAR, ADDITIVE, MULTILINEAR = Linearity.NONLINEAR, Linearity.ADDITIVE, Linearity.MULTILINEAR
MOVES, INCREASING, DECREASING = Monotone.MOVES, Monotone.INCREASING, Monotone.DECREASING

UNARY_LINEAR = Apply(Linearity.LINEAR, Arg(0))
BINARY_ADD = Apply(ADDITIVE, Arg(0), Arg(1))
BINARY_MUL = Apply(MULTILINEAR, Arg(0), Arg(1))
ALL_NONLINEAR = Variadic(NONLINEAR)
DIVIDE = Apply(MULTILINEAR, Arg(0), Apply(NONLINEAR, Arg(1)))
LINEAR_LAYER = Apply(ADDITIVE, Apply(MULTILINEAR, Arg(0), Arg(1)), Arg(2))
ADD_PRODUCT = Apply(ADDITIVE, Arg(0), Apply(MULTILINEAR, Arg(1), Arg(2)))
SDPA = Apply(MULTILINEAR, Apply(NONLINEAR, Arg(0), Arg(1), Arg(3)), Arg(2))

SPMD_SUM, SPMD_AMAX, SPMD_AMIN = SpmdForm("sum"), SpmdForm("amax"), SpmdForm("amin")
SPMD_MATMUL, SPMD_LINEAR = SpmdForm("matmul"), SpmdForm("linear")
SPMD_MEAN = SpmdForm("sum", "x, dim", " divided by the global size (a pending sum)")


def ops(
    words: str,
    linearity: Rule,
    effect: Effect = None,
    shape: ShapeRule | None = None,
    *,
    partial: str | None = None,
    spmd: SpmdForm | None = None,
    bias: int | None = None,
    no_grad: tuple[int, ...] = (),
    result_has_gradient: bool = True,
    attribute: bool = False,
) -> list[Op]:
    """One record per word of ``words`` (see :class:`~spmd_stubs.core.torch_ops.record.Op` for the facts)."""
    return [
        Op(tuple(word.split("/")), linearity, effect, shape, partial, spmd, bias=bias, no_grad=no_grad,
           result_has_gradient=result_has_gradient, attribute=attribute)
        for word in words.split()
    ]


RECORDS: tuple[Op, ...] = (
    # Data movement and copies: linear, and every element keeps its value.
    *ops("clone contiguous float half double bfloat16 to type type_as cuda cpu requires_grad_ pin_memory",
         UNARY_LINEAR, MOVES, POINTWISE),
    *ops("detach", UNARY_LINEAR, MOVES, POINTWISE, result_has_gradient=False),
    *ops("view_as reshape_as unflatten expand expand_as repeat repeat_interleave tile fliplr flipud roll rot90"
         " diagonal unfold view_as_real view_as_complex", UNARY_LINEAR, MOVES),
    # x.zero_(): zeros are a part of any sum and the same on every rank, so every type stays.
    *ops("zero", UNARY_LINEAR, MOVES, POINTWISE),
    # x.fill_(value): every element is value; x gives only the shape.
    *ops("fill", Arg(1), shape=POINTWISE),
    *ops("view", UNARY_LINEAR, MOVES, new_shape("size")),
    *ops("reshape", UNARY_LINEAR, MOVES, new_shape("shape")),
    *ops("flatten ravel", UNARY_LINEAR, MOVES, FLATTEN),
    *ops("squeeze", UNARY_LINEAR, MOVES, SQUEEZE),
    *ops("unsqueeze", UNARY_LINEAR, MOVES, UNSQUEEZE),
    *ops("transpose/swapdims", UNARY_LINEAR, MOVES, transpose("dim0", "dim1")),
    *ops("swapaxes", UNARY_LINEAR, MOVES, transpose("axis0", "axis1")),
    *ops("t", UNARY_LINEAR, MOVES, MATRIX_TRANSPOSE),
    *ops("permute", UNARY_LINEAR, MOVES, PERMUTE),
    *ops("movedim/moveaxis", UNARY_LINEAR, MOVES, MOVEDIM),
    *ops("narrow", UNARY_LINEAR, MOVES, along()),
    *ops("chunk split tensor_split", UNARY_LINEAR, MOVES, along(0)),
    *ops("flip", UNARY_LINEAR, MOVES, along(name="dims")),
    *ops("select", UNARY_LINEAR, MOVES, reduce(REQUIRED)),
    *ops("unbind", UNARY_LINEAR, MOVES, reduce(0)),
    # Tensor properties that are views (w.T).
    *ops("T H", UNARY_LINEAR, MOVES, MATRIX_TRANSPOSE, attribute=True),
    *ops("mT mH", UNARY_LINEAR, MOVES, LAST_TWO_TRANSPOSE, attribute=True),
    *ops("data", UNARY_LINEAR, MOVES, POINTWISE, attribute=True),
    # Other linear ops.
    *ops("sum nansum", UNARY_LINEAR, shape=reduce(), partial="sum", spmd=SPMD_SUM),
    *ops("mean", UNARY_LINEAR, shape=reduce(), spmd=SPMD_MEAN),
    *ops("cumsum", UNARY_LINEAR, shape=along()),
    *ops("tril triu", UNARY_LINEAR, shape=ALONG_LAST_TWO),
    *ops("real imag conj positive/__pos__", UNARY_LINEAR, shape=POINTWISE),
    *ops("diag diag_embed trace as_strided pad adaptive_avg_pool1d avg_pool1d avg_pool2d diff", UNARY_LINEAR),
    # Integer and bool casts truncate: nonlinear, and their results carry no gradient.
    *ops("bool int long short byte char", ALL_NONLINEAR, shape=POINTWISE, result_has_gradient=False),
    *ops("neg/negative/__neg__", UNARY_LINEAR, DECREASING, POINTWISE),
    # Nonlinear elementwise ops; the non-decreasing ones keep a pending max/min.
    *ops("exp exp2 expm1 log log2 log10 log1p atan sinh tanh asinh sigmoid logsigmoid/log_sigmoid relu relu6 silu"
         " elu selu celu leaky_relu hardtanh hardsigmoid softplus sqrt floor ceil round trunc clamp clip clamp_min"
         " clamp_max erf polar",
         ALL_NONLINEAR, INCREASING, POINTWISE),
    *ops("sin cos tan asin acos atan2 cosh acosh atanh logit gelu mish hardswish softsign tanhshrink threshold rsqrt"
         " abs/absolute/__abs__ square pow/__pow__/__rpow__ float_power reciprocal sign sgn frac fmod"
         " remainder/__mod__/__rmod__ erfc erfinv maximum minimum fmax fmin floor_divide/__floordiv__/__rfloordiv__"
         " nan_to_num dropout dropout1d dropout2d alpha_dropout feature_alpha_dropout", ALL_NONLINEAR, shape=POINTWISE),
    # Tests, comparisons and bitwise ops give bools or integers; a Bernoulli sample is drawn with
    # the input as its probability.
    *ops("isnan isinf isneginf isposinf isfinite signbit eq/__eq__ ne/not_equal/__ne__ lt/less/__lt__"
         " le/less_equal/__le__ gt/greater/__gt__ ge/greater_equal/__ge__ logical_and logical_or logical_not"
         " logical_xor bitwise_and/__and__/__rand__ bitwise_or/__or__/__ror__ bitwise_xor/__xor__/__rxor__"
         " bitwise_not/__invert__ bernoulli", ALL_NONLINEAR, shape=POINTWISE, result_has_gradient=False),
    # Nonlinear ops along or over dims.
    *ops("softmax log_softmax softmin logcumsumexp cumprod", ALL_NONLINEAR, shape=along()),
    *ops("glu sort topk", ALL_NONLINEAR, shape=along(-1)),
    *ops("argsort", ALL_NONLINEAR, shape=along(-1), result_has_gradient=False),
    *ops("normalize", ALL_NONLINEAR, shape=along(1)),
    *ops("amax", ALL_NONLINEAR, Monotone.MAX, reduce(), partial="max", spmd=SPMD_AMAX),
    *ops("amin", ALL_NONLINEAR, Monotone.MIN, reduce(), partial="min", spmd=SPMD_AMIN),
    # max(dim) / min(dim) also return indices, which a pending extremum cannot give: no effect.
    *ops("max", ALL_NONLINEAR, shape=REDUCE_OR_POINTWISE, spmd=SPMD_AMAX),
    *ops("min", ALL_NONLINEAR, shape=REDUCE_OR_POINTWISE, spmd=SPMD_AMIN),
    *ops("median var std prod", ALL_NONLINEAR, shape=reduce()),
    *ops("argmax argmin any all count_nonzero", ALL_NONLINEAR, shape=reduce(), result_has_gradient=False),
    *ops("kthvalue", ALL_NONLINEAR, shape=reduce(-1)),
    *ops("logsumexp", ALL_NONLINEAR, shape=reduce(REQUIRED)),
    *ops("mode norm var_mean std_mean allclose group_norm batch_norm instance_norm"
         " local_response_norm mse_loss l1_loss smooth_l1_loss huber_loss kl_div"
         " binary_cross_entropy binary_cross_entropy_with_logits cosine_similarity pairwise_distance unique"
         " bincount histc", ALL_NONLINEAR),
    # Indices, bools and samples drawn with the inputs as probabilities: nonlinear in every input.
    *ops("isclose equal one_hot nonzero argwhere searchsorted bucketize multinomial", ALL_NONLINEAR,
         result_has_gradient=False),
    # Random integers: no input gives their values, so with no typed operand the result is unknown
    # (docs/spec.md#scalars-constants-unknowns); randint_like's input gives only the shape.
    *ops("randint randperm", ALL_NONLINEAR, result_has_gradient=False),
    *ops("randint_like", Variadic(NONLINEAR, start=1), result_has_gradient=False),
    # Sums and products.
    *ops("add/__add__/__radd__", BINARY_ADD, INCREASING, POINTWISE),
    *ops("sub/subtract/__sub__", BINARY_ADD, (INCREASING, DECREASING), POINTWISE),
    *ops("rsub/__rsub__", BINARY_ADD, (DECREASING, INCREASING), POINTWISE),
    *ops("lerp", BINARY_ADD, shape=POINTWISE),
    *ops("mul/multiply/__mul__/__rmul__", BINARY_MUL, shape=POINTWISE),
    *ops("div/divide/true_divide/__truediv__", DIVIDE, shape=POINTWISE),
    *ops("__rtruediv__", Apply(MULTILINEAR, Arg(1), Apply(NONLINEAR, Arg(0))), shape=POINTWISE),
    *ops("addcmul", ADD_PRODUCT, shape=POINTWISE),
    *ops("addcdiv", Apply(ADDITIVE, Arg(0), Apply(MULTILINEAR, Arg(1), Apply(NONLINEAR, Arg(2)))), shape=POINTWISE),
    # Contractions (the einsum rule in global SPMD).
    *ops("matmul/__matmul__", BINARY_MUL, shape=MATMUL, partial="sum", spmd=SPMD_MATMUL),
    *ops("__rmatmul__", BINARY_MUL, shape=RMATMUL, partial="sum", spmd=SPMD_MATMUL),
    *ops("mm", BINARY_MUL, shape=matmul_of("ij,jk->ik"), partial="sum", spmd=SPMD_MATMUL),
    *ops("bmm", BINARY_MUL, shape=matmul_of("bij,bjk->bik"), partial="sum", spmd=SPMD_MATMUL),
    *ops("mv", BINARY_MUL, shape=matmul_of("ij,j->i"), partial="sum"),
    *ops("dot vdot", BINARY_MUL, shape=matmul_of("i,i->"), partial="sum"),
    *ops("outer ger", BINARY_MUL, shape=matmul_of("i,j->ij"), partial="sum"),
    *ops("inner kron tensordot cross", BINARY_MUL),
    # torch._grouped_mm(A, B, offs=...): each group of A's rows times its B (the offsets are no operand)
    *ops("_grouped_mm", BINARY_MUL),
    *ops("einsum", Variadic(MULTILINEAR), shape=EINSUM, partial="sum", spmd=EINSUM_FORM),
    *ops("chain_matmul", Variadic(MULTILINEAR)),
    *ops("linear", LINEAR_LAYER, shape=LINEAR, partial="sum", spmd=SPMD_LINEAR, bias=2),
    *ops("bilinear", Apply(ADDITIVE, Apply(MULTILINEAR, Arg(0), Arg(1), Arg(2)), Arg(3)), bias=3),
    *ops("addmm addbmm baddbmm addmv", ADD_PRODUCT, bias=0),
    *ops("layer_norm", Apply(ADDITIVE, Apply(MULTILINEAR, Apply(NONLINEAR, Arg(0)), Arg(2)), Arg(3)),
         shape=ALONG_TRAILING),
    *ops("rms_norm", Apply(MULTILINEAR, Apply(NONLINEAR, Arg(0)), Arg(2)), shape=ALONG_TRAILING),
    *ops("scaled_dot_product_attention", SDPA, shape=ATTENTION),
    # flex_attention(q, k, v, score_mod, block_mask): the score modification and the block mask act on
    # the scores, softmax(q k^T) @ v as for SDPA (the mask is no tensor operand).
    *ops("flex_attention", Apply(MULTILINEAR, Apply(NONLINEAR, Arg(0), Arg(1)), Arg(2)), shape=ATTENTION),
    # Joins: the operands are the terms of one sum.
    *ops("cat/concat", Variadic(ADDITIVE), MOVES, cat()),
    *ops("concatenate", Variadic(ADDITIVE), MOVES, cat("axis")),
    *ops("stack", Variadic(ADDITIVE), MOVES, STACK),
    *ops("hstack vstack dstack", Variadic(ADDITIVE), MOVES),
    # Selections: an index, mask or condition picks from the data.
    *ops("__getitem__ take_along_dim masked_select", Arg(0), MOVES, no_grad=(1,)),
    *ops("gather", Arg(0), MOVES, no_grad=(2,)),
    *ops("index_select", Arg(0), MOVES, along(), no_grad=(2,)),
    *ops("masked_fill", Apply(ADDITIVE, Arg(0), Arg(2)), shape=POINTWISE, no_grad=(1,)),
    *ops("where", Apply(ADDITIVE, Arg(1), Arg(2)), shape=POINTWISE, no_grad=(0,)),
    *ops("embedding", Arg(1), no_grad=(0,)),
    # (x, dim, index, src): src's values land in x at index; the result is the sum of both parts.
    *ops("scatter scatter_add index_add index_copy", Apply(ADDITIVE, Arg(0), Arg(3)), no_grad=(2,)),
    # (input, target, weight): the class indices select a log-probability.
    *ops("cross_entropy nll_loss", Apply(NONLINEAR, Arg(0), Arg(2)), no_grad=(1,)),
)

CONSTANT_FACTORIES = frozenset(
    "zeros ones full empty zeros_like ones_like full_like empty_like arange linspace logspace eye tensor"
    " as_tensor scalar_tensor".split()
)
"""Fixed-value factories: the same value on every rank, so R on every axis where
such a call is an operand (its result, once stored, is unknown)."""
