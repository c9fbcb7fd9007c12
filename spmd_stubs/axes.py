"""The predeclared mesh axes: data, tensor, context, expert and pipeline parallel.

Declare more with ``class edp(MeshAxis): ...``.
"""

from spmd_stubs.types import MeshAxis

__all__ = ["dp", "tp", "cp", "ep", "pp"]


class dp(MeshAxis):  # noqa: N801 -- axes read like mesh dim names
    """Data parallel."""


class tp(MeshAxis):  # noqa: N801
    """Tensor (model) parallel; sequence parallel shards activations on it too."""


class cp(MeshAxis):  # noqa: N801
    """Context parallel."""


class ep(MeshAxis):  # noqa: N801
    """Expert parallel."""


class pp(MeshAxis):  # noqa: N801
    """Pipeline parallel."""
