"""Raw ``torch.distributed`` collectives and the typed call each can become: data only.

torch's collectives work in place (or into a preallocated output) and know
nothing about gradients.  Each row says which argument is the input, which
one receives the result, and the typed call; ``dst=None`` marks the
reductions and gathers whose result is replicated, where only the author
knows whether the next step is the same work on every rank (``I``) or
different work (``R``): the codemod asks instead of guessing unless told
with ``--replicated-dst``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RawCollective", "RAW_COLLECTIVES", "LIST_COLLECTIVES", "GROUP_AXES", "axis_of_group"]


@dataclass(frozen=True)
class RawCollective:
    """One ``torch.distributed`` collective on a single tensor."""

    params: tuple[str, ...]
    tensor: str
    target: str
    op: str
    src: str
    dst: str | None


_GATHER = RawCollective(("output_tensor", "input_tensor", "group", "async_op"),
                        "input_tensor", "output_tensor", "all_gather", "S(0)", None)
_REDUCE_SCATTER = RawCollective(("output", "input", "op", "group", "async_op"),
                                "input", "output", "reduce_scatter", "P", "S(0)")

RAW_COLLECTIVES: dict[str, RawCollective] = {
    "torch.distributed.all_reduce": RawCollective(
        ("tensor", "op", "group", "async_op"), "tensor", "tensor", "all_reduce", "P", None
    ),
    "torch.distributed.all_gather_into_tensor": _GATHER,
    "torch.distributed._all_gather_base": _GATHER,
    "torch.distributed.reduce_scatter_tensor": _REDUCE_SCATTER,
    "torch.distributed._reduce_scatter_base": _REDUCE_SCATTER,
    "torch.distributed.all_to_all_single": RawCollective(
        ("output", "input", "output_split_sizes", "input_split_sizes", "group", "async_op"),
        "input", "output", "all_to_all", "S(0)", "S(0)",
    ),
}
"""Keyed by qualified name; ``params`` are torch's parameter names in order."""

LIST_COLLECTIVES: dict[str, str] = {
    "torch.distributed.all_gather": (
        "all_gather fills a list of tensors; replace it and the list's uses with "
        "y = spmd.all_gather(x, AXIS, src=V|S(i), dst=R|I) (V stacks the parts on a new dim 0, "
        "S(i) concatenates them on dim i)"
    ),
    "torch.distributed.reduce_scatter": (
        "reduce_scatter takes a list of inputs; stack or concatenate them and use "
        "y = spmd.reduce_scatter(x, AXIS, src=P, dst=V|S(i))"
    ),
    "torch.distributed.all_to_all": (
        "all_to_all exchanges lists of tensors; concatenate them and use "
        "y = spmd.all_to_all(x, AXIS, src=S(i), dst=S(j))"
    ),
}
"""List-based collectives: no one-to-one typed call, always a TODO."""

GROUP_AXES: tuple[tuple[str, str | None], ...] = (
    ("tp_ep", None),
    ("tp_cp", None),
    ("dp_cp", None),
    ("expert_tensor_and_model", None),
    ("tensor_and_data", None),
    ("tensor_and_context", None),
    ("expert_tensor", "tp"),
    ("expert", "ep"),
    ("ep_group", "ep"),
    ("tensor_model_parallel", "tp"),
    ("tp_group", "tp"),
    ("model_parallel_group", "tp"),
    ("context_parallel", "cp"),
    ("cp_group", "cp"),
    ("data_parallel", "dp"),
    ("dp_group", "dp"),
    ("pipeline", "pp"),
    ("pp_group", "pp"),
)
"""Substrings of a group's name and the mesh axis they mean, most specific first.

``None`` marks flattened groups (Megatron's ``tp_ep_group``, the (dp, cp)
group...): one name, several axes, so no axis is read from it.  fairscale's
``get_model_parallel_group()`` is its tensor-parallel group.
"""

_AXIS_NAMES = ("tp", "dp", "cp", "ep", "pp")


def axis_of_group(group_name: str) -> str | None:
    """The mesh axis a group's name (``self.tp_group``, ``pg_collection.tp``) says, if any."""
    lowered = group_name.lower()
    last = lowered.rpartition(".")[2]
    if last in _AXIS_NAMES:
        return last
    for needle, axis in GROUP_AXES:
        if needle in lowered:
            return axis
    return None
