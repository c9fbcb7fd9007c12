"""torch's tensor-parallel styles as SPMD types on the plan's mesh axis (docs/spec.md#dtensor-plans).

``parallelize_module(module, mesh, {"w1": ColwiseParallel(), ...})`` turns
each planned module's inputs into DTensors with ``DTensor.from_local`` and
its outputs back with ``to_local()`` (``torch/distributed/tensor/parallel/
style.py``).  Both keep DTensor's default gradient placements, so a local
tensor crossing that boundary has the type its placement names with the
gradient equal to the placement ([dtensor.md](../../docs/dtensor.md)):
``Replicate()`` is ``I`` (its gradient is the whole gradient on every rank:
``from_local``'s backward all-reduces a pending one), ``Shard(d)`` is
``S(d)``, ``Partial()`` is ``P``.  :func:`style_types` gives, for one style
and its options, the local types its module takes (by position, and by
keyword where ``input_kwarg_layouts`` names one) and hands on;
``PrepareModuleInputOutput`` is ``PrepareModuleInput`` (its
``use_local_input`` the latter's ``use_local_output``) then
``PrepareModuleOutput``, as torch builds it.  A DTensor input is taken as it
is (DTensor redistributes it correctly), so only local tensors are judged.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Union

from spmd_stubs.core.axis_types import AxisType, Invariant, Kind, Partial, Shard


@dataclass(frozen=True)
class Placement:
    """A DTensor placement on the plan's one mesh dim: ``Replicate()``, ``Shard(dim)`` or ``Partial()``."""

    kind: str
    dim: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("Replicate", "Shard", "Partial") or (self.dim is None) != (self.kind != "Shard"):
            raise ValueError(f"not a placement: {self.kind}({self.dim if self.dim is not None else ''})")

    def __str__(self) -> str:
        return f"{self.kind}({self.dim if self.dim is not None else ''})"

    @property
    def local_type(self) -> AxisType:
        """The type of a local tensor ``from_local``/``to_local`` pair with this placement (default gradients)."""
        if self.kind == "Shard":
            assert self.dim is not None
            return Shard(self.dim)
        return Invariant if self.kind == "Replicate" else Partial


REPLICATE = Placement("Replicate")


def shard(dim: int) -> Placement:
    return Placement("Shard", dim)


@dataclass(frozen=True)
class Handed:
    """A value a style hands on: a local tensor of ``type``, or (``dtensor``) a DTensor of that placement."""

    placement: Placement
    dtensor: bool

    @property
    def type(self) -> AxisType:
        return self.placement.local_type

    def shown(self, axis: str) -> str:
        return f"a DTensor {self.placement}" if self.dtensor else self.type.on(axis)


@dataclass(frozen=True)
class KeywordLayouts:
    """A ``{"hidden_states": Shard(1)}`` option: a placement per keyword input, in the order written."""

    items: tuple[tuple[str, Placement], ...]

    def __str__(self) -> str:
        return "{" + ", ".join(f'"{name}": {placement}' for name, placement in self.items) + "}"


Option = Union[Placement, None, bool, int, tuple[Union[Placement, None], ...], KeywordLayouts]
"""An option's literal value: a placement, a tuple of them (``None`` for an input left alone), a flag, a dim
or the layouts of keyword inputs."""


@dataclass(frozen=True)
class KeywordInput:
    """What ``PrepareModuleInput`` does to one keyword input its ``input_kwarg_layouts`` names."""

    needed: AxisType
    """The local type a caller must pass."""
    received: Handed
    """What the module's own ``forward`` receives."""
    redistributed: bool
    """Whether a DTensor passed is redistributed (a desired layout is given and differs)."""


@dataclass(frozen=True)
class StyleTypes:
    """What one style makes of its module on the plan's mesh axis."""

    inputs: tuple[AxisType | None, ...]
    """Per positional input: the local type a caller must pass (``None``: passed on as it is)."""
    received: tuple[Handed | None, ...] = ()
    """Per positional input: what the module's own ``forward`` receives (``PrepareModuleInput``)."""
    redistributed: tuple[bool, ...] = ()
    """Per positional input: whether its declared and desired layouts differ, so that a DTensor input is
    redistributed to the desired one (where they are equal torch keeps a DTensor's own placement)."""
    parameters: Mapping[str, AxisType] = field(default_factory=dict)
    """The module's parameters' local types (their DTensor gradients have the same placement)."""
    output: Handed | None = None
    """What the next code gets; ``None``: what the module's own ``forward`` returns."""
    returned: AxisType | None = None
    """The local type the module's own ``forward`` must return (``PrepareModuleOutput``)."""
    keyword_inputs: Mapping[str, KeywordInput] = field(default_factory=dict)
    """Per keyword input ``input_kwarg_layouts`` names: what a caller passes and ``forward`` receives; any
    other keyword input is passed on as it is."""
    positional_count: int | None = None
    """How many positional inputs the module must be called with (``PrepareModuleInput`` with
    ``input_layouts``: torch raises for another count); None: any."""


STYLES = ("ColwiseParallel", "RowwiseParallel", "SequenceParallel", "PrepareModuleInput", "PrepareModuleOutput",
          "PrepareModuleInputOutput")
"""The styles modelled, by class name (``torch.distributed.tensor.parallel.style``)."""

_INPUTS = ("input_layouts", "desired_input_layouts", "input_kwarg_layouts", "desired_input_kwarg_layouts")
_OUTPUTS = ("output_layouts", "desired_output_layouts")

OPTIONS: Mapping[str, tuple[str, ...]] = {
    "ColwiseParallel": ("input_layouts", "output_layouts", "use_local_output"),
    "RowwiseParallel": ("input_layouts", "output_layouts", "use_local_output"),
    "SequenceParallel": ("sequence_dim", "use_local_output"),
    "PrepareModuleInput": (*_INPUTS, "use_local_output"),
    "PrepareModuleOutput": (*_OUTPUTS, "use_local_output"),
    "PrepareModuleInputOutput": (*_INPUTS, "use_local_input", *_OUTPUTS, "use_local_output"),
}
"""Each style's keyword options: all of torch's."""

FLAGS: Mapping[str, Mapping[str, bool]] = {
    style: {flag: flag == "use_local_output" and style not in ("SequenceParallel", "PrepareModuleInput")
            for flag in ("use_local_input", "use_local_output") if flag in options}
    for style, options in OPTIONS.items()
}
"""Each style's ``use_local_*`` flags and their defaults: the input side hands on DTensors, the output side
local tensors, ``SequenceParallel`` a DTensor."""


def style_types(style: str, options: Mapping[str, Option], module: str) -> StyleTypes:
    """The types of ``style(**options)`` applied to a module of kind ``module`` (``"linear"``,
    ``"embedding"``, ``"composite"``: one holding sub-modules, or ``"other"``).  Raises ``ValueError`` for a style, option or module kind torch
    refuses or that is not modelled."""
    unknown = set(options) - set(OPTIONS.get(style, ()))
    if style not in OPTIONS or unknown:
        raise ValueError(f"{style} with {sorted(unknown)} is not modelled")
    flags = {flag: options.get(flag, default) for flag, default in FLAGS[style].items()}
    if not all(isinstance(value, bool) for value in flags.values()):
        raise ValueError("use_local_input and use_local_output must be literal bools")
    local = bool(flags["use_local_output"])
    if style in ("ColwiseParallel", "RowwiseParallel"):
        return _linear_style(style == "ColwiseParallel", options, module, local)
    if style == "SequenceParallel":
        if module == "composite":  # its output is what its sub-modules make of the shard, not followed
            raise ValueError("SequenceParallel is modelled on a module without sub-modules (a norm, dropout)")
        dim = options.get("sequence_dim", 1)
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise ValueError("sequence_dim must be a literal int")
        on_sequence = shard(dim)
        return StyleTypes((on_sequence.local_type,), parameters={"weight": Invariant, "bias": Invariant},
                          output=Handed(on_sequence, not local))
    if style == "PrepareModuleInput":
        return _prepared_inputs(options, local)
    if style == "PrepareModuleOutput":
        return _prepared_output(options, local)
    inputs = _prepared_inputs(options, bool(flags["use_local_input"]))
    output = _prepared_output(options, local)
    return replace(inputs, returned=output.returned, output=output.output)


def _prepared_inputs(options: Mapping[str, Option], local: bool) -> StyleTypes:
    """``PrepareModuleInput``: each declared input converted with ``from_local`` (a DTensor kept), then
    redistributed to its desired layout, then (``local``) ``to_local()``."""
    given, desired = _layouts(options, "input_layouts"), _layouts(options, "desired_input_layouts")
    if given != (None,) and len(given) != len(desired) or given != (None,) and desired == (None,):
        raise ValueError("torch asserts desired_input_layouts of input_layouts' length")
    keyword_given = _keyword_layouts(options, "input_kwarg_layouts")
    keyword_desired = _keyword_layouts(options, "desired_input_kwarg_layouts")
    if keyword_given is not None and len(keyword_given) != len(keyword_desired or {}):
        raise ValueError("torch asserts desired_input_kwarg_layouts of input_kwarg_layouts' length")
    keyword_inputs = {
        name: KeywordInput(placement.local_type, Handed((keyword_desired or {}).get(name) or placement, not local),
                           (keyword_desired or {}).get(name) not in (None, placement))
        for name, placement in (keyword_given or {}).items()}
    return StyleTypes(
        tuple(p.local_type if p is not None else None for p in given),
        received=tuple(None if p is None else Handed(d or p, not local) for p, d in zip(given, desired)),
        redistributed=tuple(d is not None and p != d for p, d in zip(given, desired)),
        keyword_inputs=keyword_inputs,
        positional_count=len(given) if options.get("input_layouts") is not None else None,
    )


def _prepared_output(options: Mapping[str, Option], local: bool) -> StyleTypes:
    """``PrepareModuleOutput``: the ``forward``'s one output converted from ``output_layouts``, redistributed
    to ``desired_output_layouts``, then (``local``) ``to_local()``."""
    produced, wanted = _layouts(options, "output_layouts"), _layouts(options, "desired_output_layouts")
    if len(produced) != 1 or produced[0] is None or wanted[0] is None or len(wanted) != 1:
        raise ValueError("only a module of one output is modelled")
    return StyleTypes((), returned=produced[0].local_type, output=Handed(wanted[0], not local))


def _linear_style(colwise: bool, options: Mapping[str, Option], module: str, local: bool) -> StyleTypes:
    """ColwiseParallel / RowwiseParallel of an ``nn.Linear`` or ``nn.Embedding``."""
    if module not in ("linear", "embedding"):
        raise ValueError("ColwiseParallel and RowwiseParallel apply to nn.Linear and nn.Embedding only")
    default_in, default_out = (REPLICATE, shard(-1)) if colwise else (shard(-1), REPLICATE)
    given = _placement(options, "input_layouts") or default_in
    produced = _placement(options, "output_layouts") or default_out
    if module == "embedding":
        # token ids carry no gradient: their layout decides no type
        weight = {"weight": Shard(1) if colwise else Shard(0)}
        return StyleTypes((None,), parameters=weight, output=Handed(produced, not local))
    parameters = {"weight": Shard(0), "bias": Shard(0)} if colwise else {"weight": Shard(1), "bias": Invariant}
    return StyleTypes((given.local_type,), parameters=parameters, output=Handed(produced, not local))


def _placement(options: Mapping[str, Option], name: str) -> Placement | None:
    value = options.get(name)
    if value is not None and not isinstance(value, Placement):
        raise ValueError(f"{name} must be one placement")
    return value


def _layouts(options: Mapping[str, Option], name: str) -> tuple[Placement | None, ...]:
    value = options.get(name)
    if isinstance(value, Placement) or value is None:
        return (value,)
    if isinstance(value, tuple) and all(p is None or isinstance(p, Placement) for p in value):
        return value
    raise ValueError(f"{name} must be a placement or a tuple of them")


def _keyword_layouts(options: Mapping[str, Option], name: str) -> dict[str, Placement] | None:
    value = options.get(name)
    if value is None or isinstance(value, KeywordLayouts):
        return dict(value.items) if value is not None else None
    raise ValueError(f"{name} must be a dict of placements")


def accepts(needed: AxisType, given: AxisType, strict: bool = False) -> bool:
    """Whether a local tensor of type ``given`` may be passed where a style converts one of type ``needed``.

    The kinds (and pending reductions) must be equal: R where I is needed
    would have its gradient counted on every rank.  A V is any shard.  Two
    shards differ where their dims are written with the same sign and differ;
    ``S(1)`` and ``S(-1)`` are one dim of a 2-D tensor, so they pass unless
    ``strict`` (where a proposed fix must hold whatever the rank).
    """
    if needed.kind is not given.kind or needed.reduce != given.reduce:
        return False
    if needed.kind is not Kind.V or needed.shard is None or given.shard is None:
        return True
    return needed.shard == given.shard or (not strict and (needed.shard < 0) != (given.shard < 0))
