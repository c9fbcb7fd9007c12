"""Every full name the plugin hooks, in one place: what mypy calls the things the checker types.

:mod:`spmd_mypy.hooks` maps these to the feature modules; the feature
modules import the names they need from here.  What the checker knows about
each torch op is its record in :mod:`spmd_stubs.core.torch_ops`, looked up
by the name mypy gives less one of these prefixes.
"""

from __future__ import annotations

from typing import Final

# --- the annotation vocabulary (spmd_stubs.types) ---
SPMD_TENSOR: Final = "spmd_stubs.types.Tensor"
MESH_AXIS: Final = "spmd_stubs.types.MeshAxis"
SPMD_GROUP: Final = "spmd_stubs.types.Group"
SHARD: Final = "spmd_stubs.types.S"
SHARDED: Final = "spmd_stubs.types.Sharded"
ASSERT_TYPE: Final = "spmd_stubs.types.assert_type"
FLAGS_CLASS: Final = "spmd_stubs.configuration.Flags"
"""``spmd.flags``: the run-time flags configurations decide."""

# --- the typed API's modules and calls ---
COLLECTIVES_MODULE: Final = "spmd_stubs.collectives."
MEGATRON_MODULE: Final = "spmd_stubs.megatron."
APPLY_MODULE: Final = "megatron.core.typed_torch.apply_module"
"""megatron-core's ``apply_module(m)``: returns ``m``, typed as its ``forward`` for callers' type hints."""
SPMD_OPS_MODULE: Final = "spmd_stubs.ops."
GROUP_OF: Final = "spmd_stubs.mesh.group_of"
TO_LOCAL: Final = "spmd_stubs.dtensor.to_local"
FROM_LOCAL: Final = "spmd_stubs.dtensor.from_local"
GLOBAL_SPMD: Final = "spmd_stubs.regions.global_spmd"
LOCAL_MAP: Final = "spmd_stubs.regions.local_map"
REINTERPRET_MESH: Final = "spmd_stubs.mesh_transitions.reinterpret_mesh"
RING_SHIFT: Final = "spmd_stubs.p2p.ring_shift"
BOUNDARY_GRADIENT: Final = "spmd_stubs.pipeline.Boundary.gradient"

# --- spmd_types, the runtime checker (its own spelling of the vocabulary) ---
SPMD_TYPES_PACKAGE: Final = "spmd_types."
SPMD_TYPES_COLLECTIVE_MODULES: Final = ("spmd_types._collectives.", "spmd_types._local.")
SPMD_TYPES_API_BOUNDARY: Final = "spmd_types._traceback.api_boundary"
"""The untyped decorator of spmd_types' public calls (``all_reduce``, ``convert``, ``assert_type``, ...)."""
SPMD_TYPES_LOCAL_MAP: Final = "spmd_types.runtime.local_map"
SPMD_TYPES_ASSERT_TYPE: Final = ("spmd_types.runtime.assert_type", "spmd_types.runtime.assert_local_type")
SPMD_TYPES_MUTATE_TYPE: Final = "spmd_types.runtime.mutate_type"
SPMD_TYPES_REINTERPRET_MESH: Final = "spmd_types._reinterpret_mesh.reinterpret_mesh"
SPMD_TYPES_ASSERT_TYPE_LIKE: Final = "spmd_types.runtime.assert_type_like"
SPMD_TYPES_ASSERT_LOCAL_TYPE_LIKE: Final = "spmd_types.runtime.assert_local_type_like"
SPMD_TYPES_RELABELS: Final = (*SPMD_TYPES_ASSERT_TYPE, SPMD_TYPES_MUTATE_TYPE)
"""The calls that return their tensor argument with another SPMD type and nothing else changed."""
SPMD_TYPES_NO_TYPECHECK: Final = "spmd_types.runtime.no_typecheck"
SPMD_TYPES_FORGOTTEN: Final = "spmd_mypy.spmd_types_api.unchecked.forgotten"
"""The stand-in the plugin puts around a value assigned in a ``no_typecheck()`` block: its SPMD types forgotten."""

# --- torch ---
TENSOR: Final = "torch._tensor.Tensor"
TENSOR_CLASSES: Final = ("Tensor", "TensorBase")
"""The classes that define torch's tensor operators (``torch._tensor.Tensor`` and its base), by short name."""
METHOD_PREFIX: Final = "torch._tensor.Tensor."
ATTRIBUTE_PREFIX: Final = "torch._C.TensorBase."
FUNCTION_MODULES: Final = (
    "torch._C._VariableFunctions.",
    "torch._C._nn.",
    "torch.nn.functional.",
    "torch.functional.",
    "torch.nn.attention.flex_attention.",
)
"""Where torch's op functions are defined (what mypy resolves ``torch.add`` to)."""
RETURN_TYPES: Final = "torch.return_types."
"""Where torch's named-tuple results live (``x.max(dim)`` is ``torch.return_types.max``)."""
AUTOGRAD_FUNCTION: Final = "torch.autograd.function.Function"
AUTOGRAD_BACKWARD: Final = "torch.autograd.backward"
AUTOGRAD_GRAD: Final = "torch.autograd.grad"
MODULE: Final = "torch.nn.modules.module.Module"
RAW_COLLECTIVE_MODULES: Final = ("torch.distributed.distributed_c10d.", "torch.distributed._functional_collectives.")
PROCESS_GROUP: Final = "torch._C._distributed_c10d.ProcessGroup"
MESH_GET_GROUP: Final = "torch.distributed.device_mesh.DeviceMesh.get_group"
DIFFERENTIABLE_COLLECTIVES_MODULE: Final = "torch.distributed.nn.functional."
PARALLELIZE_MODULE: Final = "torch.distributed.tensor.parallel.api.parallelize_module"
"""torch's tensor-parallel entry point, whose literal plan :mod:`spmd_mypy.plans` checks."""
STYLE_MODULE: Final = "torch.distributed.tensor.parallel.style."
PLACEMENT_MODULE: Final = "torch.distributed.tensor.placement_types."
DTENSOR_LOCAL_MAP: Final = "torch.distributed.tensor.experimental._func_map.local_map"
"""DTensor's ``local_map``, whose region :mod:`spmd_mypy.dtensor_local_map` checks."""
MODULE_CONTAINERS: Final = ("torch.nn.modules.container.ModuleList", "torch.nn.modules.container.ModuleDict")
LINEAR: Final = "torch.nn.modules.linear.Linear"
EMBEDDING: Final = "torch.nn.modules.sparse.Embedding"

# --- the plugin's own wrappers (spmd_mypy.wrappers puts calls of these around expressions) ---
RETURNED: Final = "spmd_mypy.wrappers.returned"
CALLED_VALUE: Final = "spmd_mypy.wrappers.called_value"
ASSIGNED: Final = "spmd_mypy.wrappers.assigned"
STARTED: Final = "spmd_mypy.wrappers.started"

TORCH_TRANSFERS: Final = frozenset(f"torch.distributed.distributed_c10d.{name}"
                                   for name in ("isend", "irecv", "batch_isend_irecv"))
"""torch's calls that start a transfer in flight whatever their arguments."""
POINT_TO_POINT_STARTS: Final = TORCH_TRANSFERS | {f"spmd_stubs.p2p.{name}" for name in ("isend", "irecv", "batch_isend_irecv")}
"""Those and the typed ones."""

NOT_USER_CODE: Final = ("torch.", "builtins.", "typing.", "spmd_stubs.collectives.", "spmd_stubs.types.", "spmd_types.")
"""Prefixes of callees whose signatures are never polymorphic in SPMD types and never strict boundaries."""
