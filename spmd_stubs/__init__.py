"""spmd_stubs: SPMD types for distributed PyTorch, checked by ``spmd_mypy``.

The annotation vocabulary (``Tensor``, ``Group``, ``R``, ``I``, ``V``, ``P``, ``S``,
``MeshAxis``) imports without torch, so the mypy plugin can share the type
algebra without loading torch; the typed collectives load torch on first use.
"""

from typing import TYPE_CHECKING, Any

from spmd_stubs.configuration import flags
from spmd_stubs.types import (
    AxisAnnotation,
    Group,
    I,
    MeshAxis,
    P,
    Pavg,
    Pmax,
    Pmin,
    R,
    S,
    Sharded,
    Tensor,
    V,
    assert_type,
)

if TYPE_CHECKING:
    from spmd_stubs._validation import set_validation
    from spmd_stubs.collectives import (
        all_gather,
        all_reduce,
        all_reduce_,
        all_to_all,
        convert,
        redistribute,
        reduce_scatter,
        reinterpret,
    )
    from spmd_stubs.dtensor import from_local, grad_placements_of, placements_of, spmd_type_of, to_local
    from spmd_stubs.mesh import bind_groups, bind_mesh, group_of, unbind
    from spmd_stubs.mesh_transitions import reinterpret_mesh
    from spmd_stubs.ops import amax as amax
    from spmd_stubs.ops import amin as amin
    from spmd_stubs.ops import einsum as einsum
    from spmd_stubs.ops import linear as linear
    from spmd_stubs.ops import matmul as matmul
    from spmd_stubs.ops import sum as sum  # noqa: A004 -- spmd.sum, left out of __all__
    from spmd_stubs.p2p import P2POp, batch_isend_irecv, irecv, isend, recv, ring_shift, send
    from spmd_stubs.pending import Pending
    from spmd_stubs.pipeline import Boundary
    from spmd_stubs.regions import global_spmd, local_map

_LAZY = {
    "all_reduce": "spmd_stubs.collectives",
    "all_reduce_": "spmd_stubs.collectives",
    "all_gather": "spmd_stubs.collectives",
    "reduce_scatter": "spmd_stubs.collectives",
    "all_to_all": "spmd_stubs.collectives",
    "reinterpret": "spmd_stubs.collectives",
    "convert": "spmd_stubs.collectives",
    "redistribute": "spmd_stubs.collectives",
    "bind_mesh": "spmd_stubs.mesh",
    "bind_groups": "spmd_stubs.mesh",
    "group_of": "spmd_stubs.mesh",
    "unbind": "spmd_stubs.mesh",
    "reinterpret_mesh": "spmd_stubs.mesh_transitions",
    "Boundary": "spmd_stubs.pipeline",
    "global_spmd": "spmd_stubs.regions",
    "local_map": "spmd_stubs.regions",
    "spmd_type_of": "spmd_stubs.dtensor",
    "placements_of": "spmd_stubs.dtensor",
    "grad_placements_of": "spmd_stubs.dtensor",
    "to_local": "spmd_stubs.dtensor",
    "from_local": "spmd_stubs.dtensor",
    "set_validation": "spmd_stubs._validation",
    "Pending": "spmd_stubs.pending",
    "ring_shift": "spmd_stubs.p2p",
    "send": "spmd_stubs.p2p",
    "recv": "spmd_stubs.p2p",
    "isend": "spmd_stubs.p2p",
    "irecv": "spmd_stubs.p2p",
    "batch_isend_irecv": "spmd_stubs.p2p",
    "P2POp": "spmd_stubs.p2p",
}

# ``spmd.sum`` / ``spmd.amax`` ... (ops with ``out_partial_axes``): importable
# by name but left out of ``__all__``, so that ``from spmd_stubs import *``
# does not shadow the builtin ``sum``.  The ``as`` imports above re-export them.
_LAZY_OPS = {name: "spmd_stubs.ops" for name in ("einsum", "matmul", "linear", "sum", "amax", "amin")}

# A literal list: mypy reads it to know what is exported (under
# --no-implicit-reexport and --strict too), so it names every lazy export.
__all__ = [
    "Tensor",
    "Group",
    "R",
    "I",
    "V",
    "P",
    "Pavg",
    "Pmax",
    "Pmin",
    "S",
    "Sharded",
    "MeshAxis",
    "AxisAnnotation",
    "assert_type",
    "flags",
    "all_reduce",
    "all_reduce_",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "reinterpret",
    "convert",
    "redistribute",
    "bind_mesh",
    "bind_groups",
    "group_of",
    "unbind",
    "reinterpret_mesh",
    "Boundary",
    "global_spmd",
    "local_map",
    "spmd_type_of",
    "placements_of",
    "grad_placements_of",
    "to_local",
    "from_local",
    "set_validation",
    "Pending",
    "ring_shift",
    "send",
    "recv",
    "isend",
    "irecv",
    "batch_isend_irecv",
    "P2POp",
]


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name) or _LAZY_OPS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'spmd_stubs' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
