"""Megatron's and fairscale's mapping helpers as typed collectives: data only.

One row per helper: the typed call it becomes and what each of its
parameters turns into.  The mypy plugin types ``spmd_stubs.megatron``'s
helpers from it and ``spmd-migrate`` rewrites Megatron calls with it (this
module imports neither mypy nor libcst, so both can load it cheaply).
``spmd_stubs.megatron`` implements the same table as code;
``tests/migrate/test_table.py`` runs those functions and checks that they
issue exactly the calls written here, so the two cannot drift apart.

Megatron's ``all_to_all`` splits dim 0 and concatenates on dim 0, so it is
``all_to_all(S(0), S(0))`` (local SPMD reads that as V -> V): the dims keep
the runtime shapes identical to Megatron's.  Given split sizes (the token
dispatch) it is ``all_to_all(V, V)`` with them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Typed", "Role", "Helper", "HELPERS", "MAPPING_MODULES", "helper_for"]


@dataclass(frozen=True)
class Typed:
    """A typed call ``spmd.<op>(x, <axis>, src=<src>, dst=<dst>)``, as source text."""

    op: str
    axis: str
    src: str
    dst: str

    def __str__(self) -> str:
        return f"{self.op}(x, {self.axis}, src={self.src}, dst={self.dst})"


class Role(enum.Enum):
    """What a helper parameter becomes in the typed call."""

    INPUT = "the tensor"
    GROUP = "passed on as group= (the typed call's process-group override)"
    SPLIT_SIZES = "passed on as split_sizes="
    INPUT_SPLIT_SIZES = "passed on as input_split_sizes=: the helper's uneven call"
    OUTPUT_SPLIT_SIZES = "passed on as output_split_sizes=: the helper's uneven call"
    OUTPUT_GRAD = "True picks the helper's dst, False its dst_if_false"
    MUST_BE_NONE = "no typed equivalent: only None (the default) can be migrated"
    MUST_BE_FALSE = "a buffer-reuse knob with no typed equivalent: only False can be migrated"


@dataclass(frozen=True)
class Helper:
    """A mapping helper: its typed call and its parameters in declaration order."""

    typed: Typed
    params: tuple[tuple[str, Role], ...]
    dst_if_false: str | None = None
    uneven: Typed | None = None
    """The typed call when split sizes are given (an all-to-all's token dispatch)."""

    def param_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.params)


_INPUT = ("input_", Role.INPUT)
_GROUP = ("group", Role.GROUP)
_TENSOR = (_INPUT, _GROUP)


def _tp(op: str, src: str, dst: str) -> Typed:
    return Typed(op, "tp", src, dst)


HELPERS: dict[str, Helper] = {
    "copy_to_tensor_model_parallel_region": Helper(_tp("convert", "I", "R"), _TENSOR),
    "reduce_from_tensor_model_parallel_region": Helper(_tp("all_reduce", "P", "I"), _TENSOR),
    "scatter_to_tensor_model_parallel_region": Helper(_tp("convert", "I", "S(-1)"), _TENSOR),
    "gather_from_tensor_model_parallel_region": Helper(_tp("all_gather", "S(-1)", "I"), _TENSOR),
    "scatter_to_sequence_parallel_region": Helper(_tp("convert", "I", "S(0)"), _TENSOR),
    "gather_from_sequence_parallel_region": Helper(
        _tp("all_gather", "S(0)", "R"),
        (
            _INPUT,
            ("tensor_parallel_output_grad", Role.OUTPUT_GRAD),
            _GROUP,
            ("output_split_sizes", Role.SPLIT_SIZES),
            ("use_global_buffer", Role.MUST_BE_FALSE),
        ),
        dst_if_false="I",
    ),
    "reduce_scatter_to_sequence_parallel_region": Helper(
        _tp("reduce_scatter", "P", "S(0)"),
        (
            _INPUT,
            _GROUP,
            ("input_split_sizes", Role.SPLIT_SIZES),
            ("use_global_buffer", Role.MUST_BE_FALSE),
        ),
    ),
    "all_gather_last_dim_from_tensor_parallel_region": Helper(_tp("all_gather", "S(-1)", "R"), _TENSOR),
    "reduce_scatter_last_dim_to_tensor_parallel_region": Helper(
        _tp("reduce_scatter", "P", "S(-1)"), _TENSOR
    ),
    "all_to_all": Helper(
        Typed("all_to_all", "ep", "S(0)", "S(0)"),
        (
            _GROUP,
            _INPUT,
            ("output_split_sizes_", Role.OUTPUT_SPLIT_SIZES),
            ("input_split_sizes", Role.INPUT_SPLIT_SIZES),
        ),
        uneven=Typed("all_to_all", "ep", "V", "V"),
    ),
}
"""Megatron-core's helpers (``megatron.core.tensor_parallel.mappings``)."""

# fairscale (and Megatron-LM before the rename) call the tensor-parallel
# region the "model parallel region"; the helpers take only the tensor.
_OLD_NAMES = {
    "copy_to_model_parallel_region": "copy_to_tensor_model_parallel_region",
    "reduce_from_model_parallel_region": "reduce_from_tensor_model_parallel_region",
    "scatter_to_model_parallel_region": "scatter_to_tensor_model_parallel_region",
    "gather_from_model_parallel_region": "gather_from_tensor_model_parallel_region",
}
HELPERS.update({old: Helper(HELPERS[new].typed, (_INPUT,)) for old, new in _OLD_NAMES.items()})

MAPPING_MODULES = frozenset(
    {
        "megatron.core.tensor_parallel",
        "megatron.core.tensor_parallel.mappings",
        "megatron.mpu",
        "megatron.mpu.mappings",
        "fairscale.nn.model_parallel",
        "fairscale.nn.model_parallel.mappings",
    }
)
"""Modules whose helpers are rewritten (the packages re-export the mappings)."""


def helper_for(qualified_name: str, relative: bool = False) -> tuple[str, Helper] | None:
    """``"megatron.core.tensor_parallel.mappings.all_to_all"`` -> its row, if it is one.

    A name that came from a relative import may lack its top-level packages
    (a namespace package like ``megatron`` has no ``__init__.py`` to find),
    so it matches any mapping module it is a dotted suffix of.
    """
    module, _, name = qualified_name.rpartition(".")
    if name not in HELPERS:
        return None
    if module in MAPPING_MODULES or (relative and any(m.endswith("." + module) for m in MAPPING_MODULES)):
        return name, HELPERS[name]
    return None
