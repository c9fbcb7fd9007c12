"""The pure theory of SPMD types: no torch, no mypy.

The mypy plugin (:mod:`spmd_mypy`) and the runtime (:mod:`spmd_stubs`) both
read their rules from here, so each rule lives in exactly one place and both
report a violation with the same words.  ``docs/spec.md`` is the
specification these modules implement; a test checks that nothing in this
folder imports torch or mypy.

=======================  ===================================================
module                   what
=======================  ===================================================
:mod:`.axis_types`       the types: R, I, V, P, S(i), pending avg/max/min
:mod:`.errors`           error codes, :class:`SpmdTypeError`, its :class:`Fix`
:mod:`.rules`            op rules by linearity, pending max/min effects
:mod:`.comms`            the transition table, duality, backward, routes
:mod:`.checks`           in-place writes, backward seeds, type asserts
:mod:`.no_gradient`      operands without a gradient: constants for the I rule
:mod:`.torch_ops`        one record per torch op
:mod:`.sharding`         shard propagation for global SPMD
:mod:`.partition_specs`  partition specs and the moves between them
:mod:`.planner`          redistribute between partition specs
:mod:`.megatron_table`   Megatron's mapping helpers as typed operations
:mod:`.mesh_transitions` moving a value to another mesh over the same ranks
:mod:`.point_to_point`   the type of a ring step
=======================  ===================================================

The names below are the algebra's surface: ``from spmd_stubs import core``
then ``core.transition(...)``.
"""

from spmd_stubs.core.axis_types import (
    REDUCE_OPS,
    SCALAR,
    AxisType,
    Invariant,
    Kind,
    Operand,
    Partial,
    PartialOf,
    Replicate,
    Scalar,
    Shard,
    TensorType,
    Varying,
    parse_axis_type,
    shard_group,
)
from spmd_stubs.core.checks import (
    check_asserted,
    check_gradient_write,
    check_inplace,
    check_loss,
    check_write,
    takes_reduced_gradient,
)
from spmd_stubs.core.comms import (
    CASTS,
    COLLECTIVES,
    IMPLICIT_PARTIAL,
    TRANSITIONS,
    Step,
    Transition,
    backward_of,
    check_source,
    dual,
    route,
    row_of,
    transition,
    transitions,
)
from spmd_stubs.core.errors import Code, Fix, SpmdTypeError, Target
from spmd_stubs.core.function_bodies import returns_as
from spmd_stubs.core.no_gradient import check_write_without_gradient, evaluate_without_gradients
from spmd_stubs.core.rules import Apply, Arg, Effect, Expr, Linearity, Monotone, evaluate

__all__ = [
    "Kind",
    "AxisType",
    "Replicate",
    "Invariant",
    "Varying",
    "Partial",
    "Shard",
    "PartialOf",
    "REDUCE_OPS",
    "shard_group",
    "Operand",
    "SCALAR",
    "Scalar",
    "TensorType",
    "parse_axis_type",
    "Code",
    "SpmdTypeError",
    "Fix",
    "Target",
    "Linearity",
    "Arg",
    "Apply",
    "Expr",
    "Monotone",
    "Effect",
    "evaluate",
    "dual",
    "Step",
    "transition",
    "transitions",
    "Transition",
    "TRANSITIONS",
    "row_of",
    "backward_of",
    "route",
    "check_source",
    "COLLECTIVES",
    "CASTS",
    "IMPLICIT_PARTIAL",
    "check_inplace",
    "check_write",
    "check_gradient_write",
    "takes_reduced_gradient",
    "check_write_without_gradient",
    "evaluate_without_gradients",
    "returns_as",
    "check_loss",
    "check_asserted",
]
