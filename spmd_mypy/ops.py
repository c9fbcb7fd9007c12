"""Where mypy finds torch's ops: the prefixes of their full names.

What the checker knows about each op is its record in
:mod:`spmd_stubs.core.torch_ops`; the hooks (:mod:`spmd_mypy.main`) pass the
names mypy gives, less these prefixes, to its lookups.
"""

FUNCTION_MODULES = (
    "torch._C._VariableFunctions.",
    "torch._C._nn.",
    "torch.nn.functional.",
    "torch.functional.",
    "torch.nn.attention.flex_attention.",
)
"""Where torch's op functions are defined (what mypy resolves ``torch.add`` to)."""

METHOD_PREFIX = "torch._tensor.Tensor."
ATTRIBUTE_PREFIX = "torch._C.TensorBase."

RETURN_TYPES = "torch.return_types."
"""Where torch's named-tuple results live (``x.max(dim)`` is ``torch.return_types.max``)."""
