"""What to do with one call: rewrite it to a typed collective, or leave a TODO.

Pure decisions over a call node and the tables (:mod:`.table`,
:mod:`.raw`); the transformer applies them.  Every message says what to
write by hand where the codemod stops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

import libcst as cst

from spmd_mypy.migrate import calls
from spmd_mypy.migrate.raw import RawCollective, axis_of_group
from spmd_stubs.core.megatron_table import Helper, Role

__all__ = ["Rewrite", "Todo", "Plan", "RawSite", "GroupAxis", "group_axis", "plan_helper", "plan_raw"]

GroupAxis = Callable[[cst.BaseExpression], Union[str, None]]
"""The mesh axis a ``group=`` expression names, if any (the transformer's, which reads the user's
``[spmd_mypy] groups`` declaration before :func:`group_axis`'s guesses)."""


@dataclass(frozen=True)
class Rewrite:
    """Replace the call with ``call``; with ``target``, the whole statement becomes ``target = call``."""

    call: cst.Call
    axis: str
    type_names: frozenset[str]
    summary: str
    target: str | None = None


@dataclass(frozen=True)
class Todo:
    message: str


Plan = Union[Rewrite, Todo]


def _rewrite(original: cst.Call, op: str, x: cst.BaseExpression, axis: str, src: str, dst: str,
             extra: list[cst.Arg], target: str | None = None) -> Rewrite:
    call = calls.typed_call(original, op, x, axis, src, dst, extra)
    names = frozenset(calls.type_names(src) | calls.type_names(dst))
    return Rewrite(call, axis, names, f"spmd.{op}(x, {axis}, src={src}, dst={dst})", target)


# --------------------------------------------------------------------------
# Megatron / fairscale mapping helpers
# --------------------------------------------------------------------------


def plan_helper(name: str, helper: Helper, call: cst.Call, axis_of: GroupAxis) -> Plan:
    """A mapping helper call -> its typed call, or a TODO naming the argument in the way."""
    by_hand = f"rewrite by hand as spmd.{helper.typed}"
    bound = calls.bind(call.args, helper.param_names())
    if isinstance(bound, str):
        return Todo(f"{name} {bound}; {by_hand}")
    sizes = split_sizes(bound, *(next(p for p, r in helper.params if r is role) for role in _UNEVEN)) \
        if helper.uneven is not None else None
    if isinstance(sizes, str):
        return Todo(f"{name}: {sizes}; {by_hand}")
    typed = helper.uneven if sizes and helper.uneven is not None else helper.typed
    dst = typed.dst
    axis = typed.axis
    extra: list[cst.Arg] = []
    for param, role in helper.params:
        arg = bound.get(param)
        if arg is None or role is Role.INPUT or role in _UNEVEN:
            continue
        value = arg.value
        if role is Role.GROUP and not calls.is_none(value):
            named = axis_of(value)
            if named is None:
                return Todo(f"which mesh axis is group={calls.source(value)}? {by_hand} with that "
                            f"axis (a flattened group is a tuple such as (tp, ep)) and "
                            f"group={calls.source(value)}")
            axis = named
            extra.append(calls.keyword("group", value))
        elif role is Role.SPLIT_SIZES and not calls.is_none(value):
            extra.append(calls.keyword("split_sizes", value))
        elif role is Role.OUTPUT_GRAD:
            flag = calls.literal_bool(value)
            if flag is None:
                return Todo(
                    f"{param}={calls.source(value)} is decided at run time; write "
                    f"spmd.{helper.typed.op}(x, tp, src={helper.typed.src}, dst=R) where it is True "
                    f"(different work per rank next) and dst={helper.dst_if_false} where it is False"
                )
            dst = dst if flag else str(helper.dst_if_false)
        elif role is Role.MUST_BE_NONE and not calls.is_none(value):
            return Todo(f"{name}: {param}= has no typed equivalent; {by_hand}")
        elif role is Role.MUST_BE_FALSE and calls.literal_bool(value) is not False:
            return Todo(f"{name}: {param}= is a buffer-reuse option the typed call does not have; "
                        f"drop it and {by_hand}")
    if "input_" not in bound:
        return Todo(f"{name} is called without its tensor; {by_hand}")
    return _rewrite(call, typed.op, bound["input_"].value, axis, typed.src, dst, [*extra, *(sizes or [])])


_UNEVEN = (Role.INPUT_SPLIT_SIZES, Role.OUTPUT_SPLIT_SIZES)


def split_sizes(bound: dict[str, cst.Arg], input_sizes: str, output_sizes: str) -> list[cst.Arg] | str | None:
    """An all-to-all's two split sizes as the typed call's keywords; None where neither is given, and
    why not where only one is (the typed uneven exchange takes both: docs/spec.md#transitions)."""
    given = {name: bound[param].value for name, param in (("input_split_sizes", input_sizes),
                                                          ("output_split_sizes", output_sizes))
             if param in bound and not calls.is_none(bound[param].value)}
    if not given:
        return None
    if len(given) == 1:
        (name, _), = given.items()
        return (f"only {name} is given, the other side split evenly; the typed uneven all_to_all takes "
                f"both (pass the even sizes too)")
    return [calls.keyword(name, value) for name, value in given.items()]


# --------------------------------------------------------------------------
# Raw torch.distributed collectives
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class RawSite:
    """Where a raw collective sits: what the in-place rewrite needs to know."""

    is_statement: bool
    parameters: frozenset[str]
    replicated_dst: str | None


_REDUCE_OPS = {"SUM": "sum", "AVG": "avg", "MAX": "max", "MIN": "min"}
_PENDING = {"max": "Pmax", "min": "Pmin"}
"""The typed input of a max or min: a value that pends that reduction (docs/types.md)."""


def _reduce_op(arg: cst.Arg | None) -> str | None:
    """``ReduceOp.SUM`` -> "sum", ``.AVG`` -> "avg", ``.MAX``/``.MIN`` -> "max"/"min"; others -> None."""
    if arg is None:
        return "sum"
    value = arg.value
    name = value.attr.value if isinstance(value, cst.Attribute) else None
    return _REDUCE_OPS.get(name or "")


def plan_raw(name: str, raw: RawCollective, call: cst.Call, site: RawSite, axis_of: GroupAxis) -> Plan:
    """A raw collective -> ``target = spmd.<op>(...)``, or a TODO saying which choice is open.

    An ``all_reduce`` into a tensor others see (``p.grad``, ``self.buffer``,
    ``bufs[i]``, a parameter) stays in place: ``spmd.all_reduce_(p.grad, ...)``,
    so the gradient buffer and its views, or the caller, still get the sum.
    """
    short = name.rpartition(".")[2]
    bound = calls.bind(call.args, raw.params)
    if isinstance(bound, str):
        return Todo(f"{short} {bound}; rewrite it as a typed spmd.{raw.op}")
    if raw.tensor not in bound or raw.target not in bound:
        return Todo(f"{short} is called without its tensors; rewrite it as a typed spmd.{raw.op}")
    group = bound.get("group")
    axis = axis_of(group.value) if group is not None else None
    x = bound[raw.tensor].value
    target = bound[raw.target].value
    reduction = _reduce_op(bound.get("op"))
    in_place = raw.op == "all_reduce" and _seen_by_others(target, site)
    sketch = _sketch(raw, x, None if in_place else target, axis or "AXIS", group, raw.dst or "R|I", reduction)

    sizes = split_sizes(bound, "input_split_sizes", "output_split_sizes") if raw.op == "all_to_all" else None
    blocker = sizes if isinstance(sizes, str) else _blocker(short, bound, target, axis, group, reduction, site, in_place)
    if blocker is not None:
        return Todo(f"{short}: {blocker}; the typed form is `{sketch}`" if blocker is sizes else
                    f"{blocker}; the typed form is `{sketch}`")
    src, dst = ("V", "V") if sizes else (raw.src, raw.dst or site.replicated_dst)
    if dst is None:
        return Todo(
            f"choose the type of the replicated result: dst=I if every rank next does the same "
            f"work with it (a loss, a metric), dst=R if it feeds different work per rank; "
            f"the typed form is `{sketch}` (--replicated-dst decides for a whole run)"
        )
    assert axis is not None and group is not None
    extra = [*(sizes or []), calls.keyword("group", group.value)]
    if reduction == "avg":
        extra.insert(0, calls.keyword("op", cst.SimpleString('"avg"')))
    if in_place:
        return _rewrite(call, "all_reduce_", x, axis, src, dst, extra)
    assert isinstance(target, cst.Name)
    return _rewrite(call, raw.op, x, axis, src, dst, extra, target=target.value)


def _seen_by_others(target: cst.BaseExpression, site: RawSite) -> bool:
    """A write into ``target`` reaches code beyond this function: an attribute, an item, a parameter."""
    if isinstance(target, cst.Name):
        return target.value in site.parameters
    return isinstance(target, (cst.Attribute, cst.Subscript))


def group_axis(group: cst.BaseExpression) -> str | None:
    """The mesh axis a ``group=`` expression names by its spelling: ``self.tp_group``, ``get_..._group()``.

    ``mesh.get_group("tp")``, ``mesh["tp"].get_group()`` and
    ``spmd.group_of(tp)`` name it for certain; other names are guesses
    (:func:`.raw.axis_of_group`).  A getter called with arguments is not
    trusted: Megatron's ``get_data_parallel_group(with_context_parallel=True)``
    is the flattened (dp, cp) group, which no single name reveals.
    """
    if not isinstance(group, cst.Call):
        return axis_of_group(calls.source(group))
    looked_up = _mesh_or_spmd_lookup(group)
    if looked_up is not None or group.args:
        return looked_up
    return axis_of_group(calls.source(group.func))


def _mesh_or_spmd_lookup(call: cst.Call) -> str | None:
    """``group_of(tp)``, ``mesh.get_group("tp")`` / ``(mesh_dim="tp")``, ``mesh["tp"].get_group()``."""
    func, args = call.func, call.args
    called = calls.source(func).rpartition(".")[2]
    if called == "group_of" and len(args) == 1 and isinstance(args[0].value, cst.Name):
        return args[0].value.value
    if called != "get_group" or not isinstance(func, cst.Attribute):
        return None
    if not args:
        receiver = func.value
        index = receiver.slice[0].slice if isinstance(receiver, cst.Subscript) and len(receiver.slice) == 1 else None
        return _string(index.value) if isinstance(index, cst.Index) else None
    by_mesh_dim = len(args) == 1 and (args[0].keyword is None or args[0].keyword.value == "mesh_dim")
    return _string(args[0].value) if by_mesh_dim else None


def _string(expr: cst.BaseExpression) -> str | None:
    value = expr.evaluated_value if isinstance(expr, cst.SimpleString) else None
    return value if isinstance(value, str) else None


def _blocker(short: str, bound: dict[str, cst.Arg], target: cst.BaseExpression, axis: str | None,
             group: cst.Arg | None, reduction: str | None, site: RawSite, in_place: bool) -> str | None:
    """Why the raw call cannot become ``target = typed call`` (or, ``in_place``, ``all_reduce_``)
    mechanically, if it cannot."""
    async_op = bound.get("async_op")
    if async_op is not None and calls.literal_bool(async_op.value) is not False:
        return f"{short} may run asynchronously; the typed collectives are synchronous (wait at once)"
    if not site.is_statement:
        return f"the result of {short} (a work handle) is used"
    if reduction is None:
        return (f"{short} reduces with {calls.source(bound['op'].value)}; the typed collectives sum, average, "
                f"or resolve a pending max or min")
    if reduction in _PENDING:
        return (f"{short} reduces with {calls.source(bound['op'].value)}: typed, its input pends a {reduction} "
                f"(src={_PENDING[reduction]}) and its gradient goes to the ranks holding the {reduction}; "
                f"keep the raw call where no gradient flows")
    if not in_place:
        if not isinstance(target, cst.Name):
            return (f"{short} writes into {calls.source(target)} in place; the typed call returns a new "
                    f"tensor, so bind it to a name and use that name afterwards")
        if target.value in site.parameters:
            return (f"{short} writes into the parameter {target.value} in place, which the caller sees; "
                    f"the typed call returns a new tensor: return it instead")
    if group is None:
        return f"{short} runs on the default (world) group, which is not a mesh axis; pass the axis' group"
    if axis is None:
        return f"which mesh axis is group={calls.source(group.value)}? name it in the typed call"
    return None


def _sketch(raw: RawCollective, x: cst.BaseExpression, target: cst.BaseExpression | None, axis: str,
            group: cst.Arg | None, dst: str, reduction: str | None) -> str:
    """The typed call as a one-line hint for a TODO; ``target`` None: the in-place ``all_reduce_``."""
    extra = ', op="avg"' if reduction == "avg" else ""
    extra += f", group={calls.source(group.value)}" if group is not None else ""
    src = _PENDING.get(reduction or "", raw.src)
    if target is None:
        return f"spmd.{raw.op}_({calls.source(x)}, {axis}, src={src}, dst={dst}{extra})"
    name = calls.source(target) if isinstance(target, cst.Name) else "y"
    return (f"{name} = spmd.{raw.op}({calls.source(x)}, {axis}, "
            f"src={src}, dst={dst}{extra})")
