"""Module-level helpers a generated program calls: V passed as P, groups as values, axes of size 1.

Each :class:`Helper` is written into the program's module before the program
(:meth:`Helper.source`) and called by one statement (``spmd_programs.Call``).
Its parameter is declared P on some axes, so that a V or S(i) argument there
is the implicit ``reinterpret(V,P)`` (docs/spec.md#v-passed-as-p); on the
other axes it is declared the argument's own type, or not at all (the axis
passes through). Four forms:

* a user function that returns its argument (``_as_partial_k``);
* a ``torch.autograd.Function`` called through ``.apply`` whose ``forward``
  returns its argument and whose ``backward`` returns its gradient: the
  backward of ``reinterpret(V,P)`` is ``reinterpret(R,V)``, free, so the
  identity is the right body (``_AsPartialK``);
* a user function that all-reduces one axis with the typed
  ``spmd.all_reduce(x, axis, src=P, dst=I)`` (``_all_reduce_k``);
* a Function whose ``forward`` takes ``group: Group[axis]`` and all-reduces
  with the raw ``dist.all_reduce(x, group=group)``, declared P -> I, its
  backward I -> R the identity (docs/spec.md#process-groups), called as
  ``_AllReduceK.apply(x, spmd.group_of(axis))`` (``_AllReduceK``). It reduces
  a copy: reducing the argument in place would change it for the program's
  other uses of it, and for autograd, which may have saved it.

The two reducing forms may start with the bypass of an axis of one rank
(docs/spec.md#axes-of-size-1)::

    if dist.get_world_size(spmd.group_of(tp)) == 1:
        return x  # P on tp where I is declared

The checker takes that ``return`` as the declared type on tp. That is sound:
on an axis of one rank the sum over the group is its only part, so P, I and R
(and V and S(i)) are the same value there, and every backward is the identity
too; the branch returns what the reduction would have. On the simulated 2 x 2
mesh no axis has one rank, so the branch never runs and the gradients are the
reduction's; the property checks that accepting the branch does not hide an
error elsewhere (the test of the other axis's size, which is ``return-value``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from spmd_stubs.core import AxisType, dual

Declared = tuple[tuple[str, AxisType], ...]
"""The declared axes of a parameter or result, in order: (axis name, type)."""


@dataclass(frozen=True)
class Helper:
    """One helper: its name, declared parameter and result, and what its body does."""

    name: str
    param: Declared
    result: Declared
    autograd: bool
    """A ``torch.autograd.Function`` called through ``.apply`` (else a plain function)."""
    reduce: Optional[str] = None
    """The axis the body all-reduces (P -> I), None for the identity."""
    group: bool = False
    """A Function that takes ``group: Group[reduce]`` and reduces with ``dist.all_reduce``."""
    size_one: Optional[str] = None
    """The axis whose size the bypass tests (``reduce`` in a right one), None for no bypass."""

    @property
    def kind(self) -> str:
        """What a report counts it as."""
        if self.reduce is None:
            return "autograd_as_partial" if self.autograd else "function_as_partial"
        return "group_all_reduce" if self.group else "function_all_reduce"

    def source(self) -> str:
        """The definition, ready to sit at module level."""
        if not self.autograd:
            return "\n".join([f"def {self.name}(x: {_annotation(self.param)}) -> {_annotation(self.result)}:",
                              *self._body("    ")]) + "\n"
        group = f", group: Group[{self.reduce}]" if self.group else ""
        grads = f"tuple[{_annotation(_duals(self.param))}, None]" if self.group else _annotation(_duals(self.param))
        return "\n".join([
            f"class {self.name}(torch.autograd.Function):",
            "    @staticmethod",
            f"    def forward(ctx: Any, x: {_annotation(self.param)}{group}) -> {_annotation(self.result)}:",
            *self._body("        "),
            "",
            "    @staticmethod",
            f"    def backward(ctx: Any, grad: {_annotation(_duals(self.result))}) -> {grads}:",
            "        return grad, None" if self.group else "        return grad",
        ]) + "\n"

    def _body(self, indent: str) -> list[str]:
        lines = []
        if self.size_one is not None:
            tested = "group" if self.group and self.size_one == self.reduce else f"spmd.group_of({self.size_one})"
            lines += [f"if dist.get_world_size({tested}) == 1:", "    return x"]
        if self.reduce is None:
            lines.append("return x")
        elif self.group:
            lines += ["reduced = x.clone()", "dist.all_reduce(reduced, group=group)", "return reduced"]
        else:
            lines.append(f"return spmd.all_reduce(x, {self.reduce}, src=P, dst=I)")
        return [indent + line for line in lines]

    def call(self, arg: str, group_axis: Optional[str]) -> str:
        """The call expression on ``arg`` (passing the group of ``group_axis`` to a Function with a group)."""
        callee = f"{self.name}.apply" if self.autograd else self.name
        group = f", spmd.group_of({group_axis})" if self.group else ""
        return f"{callee}({arg}{group})"


def _annotation(declared: Declared) -> str:
    return "Tensor[" + ", ".join(t.on(axis) for axis, t in declared) + "]"


def _duals(declared: Declared) -> Declared:
    return tuple((axis, dual(t)) for axis, t in declared)
