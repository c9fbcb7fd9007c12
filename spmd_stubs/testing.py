"""Check a hand-written autograd Function against the SPMD types it declares.

A ``torch.autograd.Function`` with a hand-written backward (Megatron's
``_CopyToModelParallelRegion``, ``_GatherFromModelParallelRegion``, ...) is
correct when its backward is the adjoint of its forward under the declared
types: what backward returns for each input must be the true gradient of the
global meaning, laid out as the dual type says (docs/spec.md#duality).
:func:`check_function` runs that test on the bound process groups, in the
simulated world as on real ranks; every rank must call it together.

The method is the adjoint (dot-product) test.  A value of type ``T`` and a
gradient of type ``dual(T)`` pair, per axis, as the sum over the axis's ranks
of their local inner products, except on an ``I`` axis, where every rank
holds the whole of both and the sum counts it ``n`` times::

    <g, dx>_T = sum over ranks of <g_r, dx_r>, divided by n_a for every I axis a

    R:  dx the same everywhere, g parts of a sum:   <sum_r g_r, dx>
    I:  dx and g the same everywhere:               <g, dx>
    V:  each rank its own:                          sum_r <g_r, dx_r>
    P:  dx parts of a sum, g the same everywhere:   <g, sum_r dx_r>

For random inputs ``x`` and a random direction ``dx`` of each input's type,
and random cotangents ``dy`` of each output's dual type, a correct backward
gives, for every input ``i`` (the others held still)::

    <backward(dy)_i, dx_i>_{T_i}  ==  sum over outputs o of <dy_o, J_i dx_i>_{U_o}

where ``J_i dx_i`` is the forward's directional derivative, taken by central
differences in float64 (exact for the linear Functions communication is made
of).  A gradient whose type is ``R`` or ``I`` on an axis (the dual of a
``P`` or ``I`` input) must also be the same on every rank of that axis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence, Union

import torch
import torch.distributed as dist

from spmd_stubs._comm import all_reduce_on
from spmd_stubs._ranks import per_rank
from spmd_stubs.core import Kind, TensorType, dual
from spmd_stubs.mesh import _group as group_named
from spmd_stubs.types import AxisAnnotation, tensor_type_of

__all__ = ["check_function", "GradientCheck", "TypeSpec"]

TypeSpec = Union[str, AxisAnnotation, Sequence[AxisAnnotation], TensorType]
"""One tensor's SPMD type: ``"I@tp, V@dp"``, ``I@tp``, ``(I@tp, V@dp)`` or a TensorType."""

_STEP = 1e-4
"""Central-difference step: truncation (step**2) and rounding (1e-16/step) both near 1e-8."""


@dataclass(frozen=True)
class GradientCheck:
    """What :func:`check_function` found for one tensor input."""

    index: int
    declared: TensorType
    backward: float
    """``<backward(dy), dx>`` paired as the input's type says."""
    forward: float
    """``<dy, J dx>`` paired as the outputs' types say: what ``backward`` must give."""
    spread: dict[str, float]
    """Axis -> how much the gradient differs across its ranks, where its dual type requires it not to."""
    rtol: float

    @property
    def adjoint(self) -> bool:
        """Whether the two sides of the adjoint identity agree (to ``rtol``)."""
        return abs(self.backward - self.forward) <= self.rtol * max(abs(self.backward), abs(self.forward), 1.0)

    @property
    def ok(self) -> bool:
        return self.adjoint and all(spread <= self.rtol for spread in self.spread.values())

    def explain(self, sizes: dict[str, int]) -> str:
        gradient_type = _dual_type(self.declared)
        lines = [f"input {self.index} ({_shown(self.declared)}, so its gradient is {_shown(gradient_type)}):"]
        for axis, axis_type in gradient_type.axes:
            spread = self.spread.get(axis, 0.0)
            if spread > self.rtol:
                lines.append(
                    f"  on {axis}: the ranks' gradients differ by up to {spread:.3g}, but "
                    f"{axis_type.on(axis)} is the same on every rank of {axis}"
                )
        if not self.adjoint:
            lines.append(
                f"  paired over {', '.join(axis for axis, _ in self.declared.axes)}: <backward, dx> = "
                f"{self.backward:.6g} but <dy, J dx> = {self.forward:.6g}: {_how_far(self.backward, self.forward, sizes)}"
            )
        return "\n".join(lines)


def check_function(
    fn: Any,
    *example_inputs: Any,
    types: Sequence[TypeSpec],
    returns: Sequence[TypeSpec],
    seed: int = 0,
    rtol: float = 1e-6,
) -> list[GradientCheck]:
    """Check ``fn``'s backward against the declared types; AssertionError naming what disagrees.

    ``fn`` is a ``torch.autograd.Function`` (called through ``apply``) or any
    differentiable callable.  ``example_inputs`` are its arguments as a
    caller passes them: tensors give only their shapes (the check draws
    random float64 values of their declared types), anything else is passed
    through.  ``types`` gives one type per tensor input, ``returns`` one per
    tensor output, in order::

        check_function(CopyToModelParallelRegion, x, types=["I@tp"], returns=["R@tp"])
        check_function(GatherFromModelParallelRegion, x, types=[S(-1)@tp], returns=[I@tp])

    Every rank of the groups involved calls it together (the types' axes
    must be bound: :func:`spmd_stubs.bind_mesh`).  ``seed`` picks the random
    draw; ``rtol`` bounds the two sides' difference relative to the larger
    (absolutely below 1) and how far the ranks of an ``R``/``I`` gradient may
    differ.  Returns one :class:`GradientCheck` per tensor input when all agree.
    """
    apply = _callable(fn)
    input_types = [_tensor_type(spec) for spec in types]
    output_types = [_tensor_type(spec) for spec in returns]
    positions = [i for i, arg in enumerate(example_inputs) if isinstance(arg, torch.Tensor)]
    if len(positions) != len(input_types):
        raise ValueError(f"types= gives {len(input_types)} types for {len(positions)} tensor inputs")
    sizes = {axis: dist.get_world_size(group_named((axis,))) for axis in _axes(input_types + output_types)}
    draw = _Draws(seed)
    args = list(example_inputs)
    for position, declared in zip(positions, input_types):
        args[position] = draw(args[position], declared)
    outputs = _tensors(apply(*args), len(output_types))
    cotangents = [draw(y, _dual_type(declared)) for y, declared in zip(outputs, output_types)]
    gradients = _gradients(apply, args, positions, cotangents)
    checks = []
    for index, (position, declared, gradient) in enumerate(zip(positions, input_types, gradients)):
        direction = draw(args[position], declared)
        derivative = _directional_derivative(apply, args, position, direction, len(output_types))
        checks.append(
            GradientCheck(
                index=index,
                declared=declared,
                backward=_pairing(gradient, direction, declared, sizes),
                forward=sum(_pairing(dy, dv, t, sizes) for dy, dv, t in zip(cotangents, derivative, output_types)),
                spread=_spread(gradient, _dual_type(declared)),
                rtol=rtol,
            )
        )
    failed = [check.explain(sizes) for check in checks if not check.ok]
    if failed:
        raise AssertionError(f"{_name(fn)}'s backward disagrees with its declared types:\n" + "\n".join(failed))
    return checks


# --------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------


def _tensor_type(spec: TypeSpec) -> TensorType:
    if isinstance(spec, TensorType):
        declared = spec
    elif isinstance(spec, str):
        declared = TensorType.parse(spec)
    elif isinstance(spec, AxisAnnotation):
        declared = tensor_type_of([spec])
    else:
        declared = tensor_type_of(spec)
    for axis, axis_type in declared.axes:
        if axis_type.kind is Kind.P and axis_type.reduce != "sum":
            raise ValueError(f"check_function pairs R, I, V, P and S(i) only, not {axis_type.on(axis)}")
    return declared


def _dual_type(declared: TensorType) -> TensorType:
    return TensorType.of({axis: dual(axis_type) for axis, axis_type in declared.axes})


def _axes(declared: list[TensorType]) -> list[str]:
    return sorted({axis for t in declared for axis, _ in t.axes})


def _shown(declared: TensorType) -> str:
    return ", ".join(axis_type.on(axis) for axis, axis_type in declared.axes)


# --------------------------------------------------------------------------
# Random values of a type
# --------------------------------------------------------------------------


class _Draws:
    """Random float64 tensors, each rank its own, then made equal across the axes where the type says so."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.count = 0

    def __call__(self, like: torch.Tensor, declared: TensorType) -> torch.Tensor:
        self.count += 1
        seed = self.seed * 1_000_003 + self.count * 1009
        # Seeded by the global rank, so that every world (simulated or real) draws the same values.
        x = per_rank(like.detach().double(), _world(), lambda rank, t: _randn(t, seed + rank))
        for axis, axis_type in declared.axes:
            if axis_type.kind in (Kind.R, Kind.I):
                group = group_named((axis,))
                x = all_reduce_on(x, group) / dist.get_world_size(group)
        return x


def _world() -> dist.ProcessGroup:
    """The default group: every rank of the job."""
    world = dist.group.WORLD
    if world is None:
        raise RuntimeError("check_function runs on the process groups: call dist.init_process_group first")
    return world


def _randn(like: torch.Tensor, seed: int) -> torch.Tensor:
    return torch.randn(like.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


# --------------------------------------------------------------------------
# Both sides of the adjoint identity
# --------------------------------------------------------------------------


def _callable(fn: Any) -> Callable[..., Any]:
    if isinstance(fn, type) and issubclass(fn, torch.autograd.Function):
        return fn.apply
    return fn  # type: ignore[no-any-return]


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", repr(fn))


def _tensors(result: Any, expected: int) -> list[torch.Tensor]:
    outputs = [y for y in (result if isinstance(result, (tuple, list)) else (result,)) if isinstance(y, torch.Tensor)]
    if len(outputs) != expected:
        raise ValueError(f"returns= gives {expected} types for {len(outputs)} tensor outputs")
    return outputs


def _gradients(
    apply: Callable[..., Any], args: list[Any], positions: list[int], cotangents: list[torch.Tensor]
) -> list[torch.Tensor]:
    """What ``backward`` gives each tensor input for the output cotangents (zeros where it gives None)."""
    live = list(args)
    inputs = [args[p].detach().requires_grad_() for p in positions]
    for position, x in zip(positions, inputs):
        live[position] = x
    outputs = _tensors(apply(*live), len(cotangents))
    grads = torch.autograd.grad(outputs, inputs, cotangents, allow_unused=True)
    return [torch.zeros_like(x) if g is None else g for x, g in zip(inputs, grads)]


def _directional_derivative(
    apply: Callable[..., Any], args: list[Any], position: int, direction: torch.Tensor, outputs: int
) -> list[torch.Tensor]:
    """``J dx`` for input ``position`` moved along ``direction``, by central differences."""

    def at(step: float) -> list[torch.Tensor]:
        moved = list(args)
        moved[position] = args[position] + step * direction
        with torch.no_grad():
            return _tensors(apply(*moved), outputs)

    return [(after - before) / (2 * _STEP) for after, before in zip(at(_STEP), at(-_STEP))]


def _pairing(gradient: torch.Tensor, value: torch.Tensor, declared: TensorType, sizes: dict[str, int]) -> float:
    """``<gradient, value>`` as the value's type pairs it: the ranks' inner products summed, once per I axis."""
    local = (gradient.double() * value.double()).sum()
    for axis, axis_type in declared.axes:
        if axis_type.kind is Kind.I:
            local = local / sizes[axis]
    return float(all_reduce_on(local, _world()).item())


def _spread(gradient: torch.Tensor, gradient_type: TensorType) -> dict[str, float]:
    """Per R or I axis of the gradient's type: the largest difference from the axis's mean, over every rank."""
    spread = {}
    for axis, axis_type in gradient_type.axes:
        if axis_type.kind in (Kind.R, Kind.I):
            group = group_named((axis,))
            mean = all_reduce_on(gradient, group) / dist.get_world_size(group)
            local = (gradient - mean).abs().amax() if gradient.numel() else gradient.new_zeros(())
            spread[axis] = float(all_reduce_on(local, _world(), "max").item())
    return spread


def _how_far(backward: float, forward: float, sizes: dict[str, int]) -> str:
    """The disagreement in words, naming the axis when the ratio is an axis size (a sum too many or missing)."""
    if forward == 0.0:
        return f"off by {backward - forward:.3g} where the declared types promise 0"
    ratio = backward / forward
    said = f"backward is {ratio:.4g} times the declared gradient"
    too_often = " or ".join(axis for axis, size in sizes.items() if math.isclose(ratio, size, rel_tol=1e-3))
    missing = " or ".join(axis for axis, size in sizes.items() if math.isclose(ratio, 1 / size, rel_tol=1e-3))
    if too_often:
        return f"{said} (the size of {too_often}: summed over {too_often} once too often)"
    if missing:
        return f"{said} (1 / the size of {missing}: a sum over {missing} is missing)"
    return said
