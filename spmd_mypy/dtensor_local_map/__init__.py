"""DTensor's ``local_map``: the region's body checked with the types its placements give (docs/spec.md#dtensors-local_map).

``local_map(func, out_placements, in_placements, in_grad_placements,
device_mesh)`` runs ``func`` on local tensors.  On each mesh dim an input's
placement and the placement its gradient is read as give the local input's
type, and an output's placement the type the body must return
(:mod:`spmd_stubs.core.local_regions`; the placements as read:
:mod:`.regions`).  At the ``local_map`` call (a decorator on a def, or
``local_map(fn, ...)`` of a def) the body is checked again with its
positional parameters and its result of those types (a parameter's own SPMD
annotation stays), so its ops are judged by the local rules.  Reported at
the call, as ``spmd-local-map``, each with the fix under which the body
checks clean where there is one:

* a parameter whose SPMD annotation disagrees with its placements;
* a pair of placements that is none of our types;
* a body that breaks a rule under its placements but checks clean with
  another gradient placement for one replicated input (``Replicate()`` read
  as ``Replicate()`` is ``I``, as ``Partial()`` is ``R``): an ``I`` input used
  with a tensor-parallel weight has a gradient that is one term of a sum,
  which DTensor, told it is whole, never adds up.

Any other rule the body breaks is reported in the body, as in any function.
An input not read keeps its parameter's annotation, and then the result its
declared type (an unknown input may make it anything); with
``in_placements`` or the axes not read the body is not checked again.
Strict mode names what was not read (``spmd-untyped-boundary``).  Callers
pass DTensors (taken as they are) or local tensors, which ``local_map``
hands to the body unconverted: a local tensor whose known type conflicts
with its input's is mypy's ``arg-type``.  The result is a DTensor where any
argument is one, so it keeps mypy's type.
"""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

from mypy.checker import TypeChecker
from mypy.nodes import ARG_OPT, ARG_POS, FUNC_NO_INFO, CallExpr, Decorator, Expression, FuncDef, NameExpr
from mypy.plugin import FunctionContext
from mypy.types import AnyType, CallableType, TupleType, Type, get_proper_type

from spmd_mypy import errorcodes, report
from spmd_mypy.call_arguments import arguments
from spmd_mypy.config import Config
from spmd_mypy.dtensor_local_map.regions import Pair, Region, read_region
from spmd_mypy.representation import spmd_of, tensor_instance, unknown_tensor, with_spmd
from spmd_mypy.source_edits import Index, Span, located_edit_note, span_of
from spmd_mypy.statements import functions_in
from spmd_mypy.wrapped_functions import ANY, decorator, tensor_or_none, tuple_of, wrapped_function
from spmd_stubs.core import AxisType, TensorType
from spmd_stubs.core.local_regions import region_input_type, typed_gradients
from spmd_stubs.core.parallel_styles import Placement, accepts

Change = tuple[int, int, Placement]
"""Input ``[0]``'s gradient read as ``[2]`` on mesh dim ``[1]``."""

_GRADIENT_MEANS = {"I": "the whole gradient on every rank", "R": "this rank's term of a sum"}
_UNREAD = ("local_map's placements or mesh axes are not all read: its body is checked without their types. "
           "Fix: write in_placements and out_placements as lists of Replicate(), Shard(d), Partial() and "
           'device_mesh as mesh["tp"] (or set current_mesh)')


def local_map_hook(settings: Config) -> Callable[[FunctionContext], Type]:
    """``local_map(...)``: the body checked with its region's types; the call typed as the wrapping it is."""

    def hook(ctx: FunctionContext) -> Type:
        args = arguments(ctx)
        region = read_region(args, settings.current_mesh)
        body = _body(ctx, args)
        if settings.strict and body is not None and (region is None or not region.read()):
            report.fail(ctx.api, ctx.context, _UNREAD, errorcodes.UNTYPED_BOUNDARY)
        if region is not None and body is not None and isinstance(ctx.api, TypeChecker):
            _Body(ctx, ctx.api, body, args.get("in_grad_placements", (None,))[0]).check(region)
        inputs = range(len(region.inputs)) if region is not None else range(0)
        parameters = [tensor_or_none(_tensor(ctx, region.input_type(i))) for i in inputs if region is not None]
        wrapped = wrapped_function(ctx, parameters, ctx.default_return_type)
        return wrapped if "func" in args else decorator(ctx, wrapped)

    return hook


def _body(ctx: FunctionContext, args: dict[str, tuple[Expression, Type]]) -> FuncDef | None:
    """The wrapped def: the one decorated by this call, or the def ``func`` names; None for anything else
    (a lambda, a method, a value)."""
    if "func" in args:
        node = args["func"][0].node if isinstance(args["func"][0], NameExpr) else None
        found = node.func if isinstance(node, Decorator) else node
    else:
        tree = getattr(ctx.api, "tree", None)
        found = next((f.node for f in functions_in(tree.defs) if any(d is ctx.context for d in f.decorators)),
                     None) if tree is not None else None
    return found if isinstance(found, FuncDef) and found.info is FUNC_NO_INFO else None


def _tensor(ctx: FunctionContext, tensor_type: TensorType | None) -> Type | None:
    tensor = unknown_tensor(ctx.api)
    return with_spmd(ctx.api, tensor, tensor_type) if tensor is not None and tensor_type is not None else None


def _tensor_like(typ: Type) -> bool:
    """A tensor, or not annotated."""
    return isinstance(get_proper_type(typ), AnyType) or tensor_instance(typ) is not None


class _Body:
    """The wrapped def, checked under a region's types."""

    def __init__(self, ctx: FunctionContext, checker: TypeChecker, body: FuncDef,
                 written_gradients: Expression | None) -> None:
        self.ctx, self.checker, self.body = ctx, checker, body
        self.written_gradients = written_gradients
        self.positional = [i for i, kind in enumerate(body.arg_kinds) if kind in (ARG_POS, ARG_OPT)]
        self.names = [body.arg_names[i] for i in self.positional]

    def check(self, region: Region) -> None:
        signature = self.signature(region)
        if signature is None:
            return
        conflicts = list(self.conflicts(region))
        for index, axis, declared, placed in conflicts:
            self.report_conflict(region, index, axis, declared, placed)
        untyped = region.untyped()
        for pair in untyped:
            self.report_untyped(region, pair)
        if untyped or conflicts or not self.errors(signature):
            self.checker.check_func_item(self.body, type_override=signature, name=self.body.name)
            return
        fixed = self.clean(region, [(index, dim, gradient) for index, leaf in enumerate(region.inputs)
                                    if leaf is not None and leaf.placements is not None
                                    for dim, forward in enumerate(leaf.placements)
                                    for gradient in typed_gradients(forward) if gradient != leaf.gradients()[dim]])
        if fixed is None:
            self.checker.check_func_item(self.body, type_override=signature, name=self.body.name)
        else:
            self.report_gradient(region, fixed)

    def signature(self, region: Region) -> CallableType | None:
        """The body's signature with the region's types; None where its positional parameters do not take the
        inputs one each (the rest must have defaults)."""
        count = len(region.inputs)
        if count > len(self.positional) or any(self.body.arg_kinds[i] != ARG_OPT for i in self.positional[count:]):
            return None
        declared = self.body.type if isinstance(self.body.type, CallableType) else CallableType(
            [ANY] * len(self.body.arg_kinds), list(self.body.arg_kinds), list(self.body.arg_names), ANY,
            self.ctx.api.named_generic_type("builtins.function", []))
        arg_types = list(declared.arg_types)
        for index, position in enumerate(self.positional[:count]):
            placed, written = region.input_type(index), spmd_of(arg_types[position])
            if placed is not None and written is not None:  # a declared axis stays: its disagreement is reported
                placed = TensorType.of({**placed.as_dict(), **written.as_dict()})
            arg_types[position] = _tensor(self.ctx, placed) or arg_types[position]
        results = region.output_types() if all(region.inputs) else None  # an unknown input may make any result
        return declared.copy_modified(arg_types=arg_types, ret_type=self.result(declared.ret_type, results,
                                                                                region.several))

    def result(self, declared: Type, results: list[TensorType | None] | None, several: bool) -> Type:
        """The declared result with each output's type where it has their shape: a tensor (or no annotation)
        for one output, a tuple of as many items for several, each output's item a tensor (DTensor flattens
        a nested result, whose leaves are not matched here)."""
        proper = get_proper_type(declared)
        if results is None:
            return declared
        items = proper.items if several and isinstance(proper, TupleType) else [declared] if not several else []
        if len(items) != len(results) or any(result is not None and not _tensor_like(item)
                                             for item, result in zip(items, results)):
            return declared
        types = [_tensor(self.ctx, result) or item for item, result in zip(items, results)]
        return tuple_of(self.ctx, types) if several else types[0]

    def errors(self, signature: CallableType) -> bool:
        """Whether the body has errors under ``signature`` (none reported)."""
        with self.checker.msg.filter_errors(save_filtered_errors=True) as watcher:
            self.checker.check_func_item(self.body, type_override=signature, name=self.body.name)
        return any(error.severity == "error" for error in watcher.filtered_errors())

    def clean(self, region: Region, changes: Sequence[Change]) -> Change | None:
        """The first change under which the body checks clean."""
        for change in changes:
            signature = self.signature(region.with_gradient(*change))
            if signature is not None and not self.errors(signature):
                return change
        return None

    def conflicts(self, region: Region) -> Iterator[tuple[int, str, AxisType, AxisType]]:
        """(input, axis, declared, placed) where a parameter's own annotation names another type than its
        placements give."""
        declared = self.body.type
        if not isinstance(declared, CallableType):
            return
        for index, position in enumerate(self.positional[:len(region.inputs)]):
            placed, written = region.input_type(index), spmd_of(declared.arg_types[position])
            for axis, axis_type in placed.axes if placed is not None and written is not None else ():
                said = written.get(axis) if written is not None else None
                if said is not None and not accepts(axis_type, said, strict=True):
                    yield index, axis, said, axis_type

    def fail(self, message: str, checked: Region | None = None) -> None:
        """Report ``message``; with the region its fix gives, checked clean, the fix as an edit too."""
        edit = self.edit(checked) if checked is not None else None
        report.fail(self.ctx.api, self.ctx.context, message, errorcodes.LOCAL_MAP, edit=edit)

    def edit(self, fixed: Region) -> str | None:
        """``in_grad_placements`` as ``fixed`` reads it: the written value replaced, or the keyword added
        after the call's last argument."""
        value, written, call = fixed.gradient_placements(), self.written_gradients, self.ctx.context
        if value is None:
            return None

        def locate(lines: list[str], index: Index) -> tuple[Span | None, str] | None:
            if written is not None:
                return span_of(written, lines, index), value
            last = span_of(call.args[-1], lines, index) if isinstance(call, CallExpr) and call.args else None
            return ((last[2], last[3], last[2], last[3]), f", in_grad_placements={value}") if last else None

        return located_edit_note(self.checker, locate)

    def report_conflict(self, region: Region, index: int, axis: str, declared: AxisType, placed: AxisType) -> None:
        leaf = region.inputs[index]
        assert leaf is not None and leaf.placements is not None
        dim = region.axes.index(axis)
        forward = leaf.placements[dim]
        giving = self.clean(region, [(index, dim, gradient) for gradient in typed_gradients(forward)
                                     if region_input_type(forward, gradient) == declared])
        fixed = region.with_gradient(*giving) if giving else None
        fix = fixed.gradient_fix(index) if fixed is not None else f"declare `{self.names[index]}` as {placed.on(axis)}"
        self.fail(f"local_map input `{self.names[index]}` is declared {declared.on(axis)} but its placements make "
                  f"it {placed.on(axis)}: in_placements {forward} with {leaf.read_as(dim)}. Fix: {fix}", fixed)

    def report_untyped(self, region: Region, pair: Pair) -> None:
        leaf = region.inputs[pair.input]
        assert leaf is not None
        changes = [(pair.input, pair.dim, gradient) for gradient in typed_gradients(pair.forward)]
        fixed = self.clean(region, changes)
        fixes = [fixed] if fixed is not None else changes
        self.fail(f"local_map input `{self.names[pair.input]}` has no SPMD type on axis {region.axes[pair.dim]}: "
                  f"in_placements {pair.forward} with {leaf.read_as(pair.dim)} is none of R, I, V, P, S(d), so no "
                  "gradient its body computes is read as it is meant. Fix: "
                  + " or ".join(region.with_gradient(*change).gradient_fix(pair.input) for change in fixes),
                  region.with_gradient(*fixed) if fixed is not None else None)

    def report_gradient(self, region: Region, change: Change) -> None:
        index, dim, gradient = change
        leaf = region.inputs[index]
        assert leaf is not None and leaf.placements is not None
        axis, forward = region.axes[dim], leaf.placements[dim]
        was, needed = region_input_type(forward, leaf.gradients()[dim]), region_input_type(forward, gradient)
        assert was is not None and needed is not None
        self.fail(f"local_map input `{self.names[index]}` is {was.on(axis)} where its body needs {needed.on(axis)}: "
                  f"in_placements {forward} with {leaf.read_as(dim)} takes the body's gradient as "
                  f"{_GRADIENT_MEANS[str(was)]}, but the body's gradient is {_GRADIENT_MEANS[str(needed)]}. "
                  f"Fix: {region.with_gradient(*change).gradient_fix(index)}", region.with_gradient(*change))
