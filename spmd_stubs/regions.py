"""Global SPMD regions: ``@global_spmd(tp)`` and ``@local_map(ep)`` (docs/spec.md#global-spmd).

A function decorated ``@global_spmd(tp)`` is written in *global* SPMD on the
mesh axis ``tp``: its body means the computation on the whole (global)
tensors, and a tensor typed ``S(i)@tp`` is one piece of a single global
tensor, reassembled by concatenating the ranks' pieces on dim ``i`` in rank
order (``S(0)@(dp, tp)``: dp major, tp minor).  ``R@tp`` / ``I@tp`` are the
global tensor itself on every rank and ``P@tp`` is a pending sum whose total
is the global tensor.  Every other mesh axis stays local.  The checker
(``spmd_mypy``) then requires each operation's local result, read through the
partition specs, to equal the operation applied to the global tensors; where
it would not (a contraction or reduction over a sharded dim, operands split
differently), it reports the communication or the ``out_partial_axes=`` that
is missing.  Partial results are never produced implicitly: a contraction
over a ``tp``-sharded dim is written ``spmd.linear(x, w, out_partial_axes=tp)``
(see :mod:`spmd_stubs.ops`).

``@local_map(ep)`` on a ``def`` nested in a global function switches ``ep``
back to local SPMD inside that def: the partition specs on ``ep`` are
forgotten (``S(i)@ep`` is read as ``V@ep``) and the body is per-rank code, as
in ``shard_map``.  A nested def without a decorator inherits the mode of the
def that encloses it; module-level code and undecorated functions are local
on every axis.

At runtime both decorators are free: they check their axes once, when the
function is decorated, record them on the function (``__spmd_global_axes__``
/ ``__spmd_local_axes__``, tuples of ``MeshAxis`` classes) and return the
function itself.  Calls are not wrapped: annotations are erased, so there is
nothing per call that could be checked cheaply, and ``torch.compile`` sees
the undecorated function.

This module imports neither torch nor mypy.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar, Union, cast

from spmd_stubs.core.axis_types import distinct_axes
from spmd_stubs.types import MeshAxis

__all__ = ["global_spmd", "local_map", "global_axes_of", "local_axes_of", "AxesArg"]

_F = TypeVar("_F", bound=Callable[..., Any])

AxesArg = Union[type[MeshAxis], tuple[type[MeshAxis], ...]]
"""One mesh axis (``tp``) or a tuple of them (``(dp, tp)``)."""

GLOBAL_ATTR = "__spmd_global_axes__"
LOCAL_ATTR = "__spmd_local_axes__"


def _is_axis(value: object) -> bool:
    return isinstance(value, type) and issubclass(value, MeshAxis) and value is not MeshAxis


def _describe(value: object) -> str:
    if isinstance(value, str):
        return f"the string {value!r} (pass the axis class, e.g. tp from spmd_stubs.axes, not its name)"
    if callable(value) and not isinstance(value, type):
        return f"{value!r} (a function: write the decorator with its axes, e.g. @global_spmd(tp))"
    return repr(value)


def _axis_name(axis: type[MeshAxis]) -> str:
    return axis.axis_name


def check_axes(values: tuple[object, ...], where: str) -> tuple[type[MeshAxis], ...]:
    """Flatten ``values`` (axes or tuples of axes) into distinct ``MeshAxis`` classes.

    Raises :class:`TypeError` naming ``where`` for anything else: no axis at
    all, an empty tuple, something that is not a ``MeshAxis`` subclass; and
    :class:`~spmd_stubs.core.axis_types.DuplicateAxisError` (a ``ValueError``)
    for an axis named twice.
    """
    axes: list[type[MeshAxis]] = []
    for value in values:
        items = value if isinstance(value, tuple) else (value,)
        if isinstance(value, tuple) and not value:
            raise TypeError(f"{where}: an empty tuple names no mesh axis; pass e.g. tp or (dp, tp)")
        for item in items:
            if not _is_axis(item):
                raise TypeError(
                    f"{where}: expected a mesh axis (a MeshAxis subclass such as tp) or a tuple of them, "
                    f"got {_describe(item)}"
                )
            axes.append(cast("type[MeshAxis]", item))
    if not axes:
        raise TypeError(f"{where}: name at least one mesh axis, e.g. {where.split('(')[0]}(tp)")
    distinct_axes((_axis_name(a) for a in axes), where)
    return tuple(axes)


def _mark(fn: _F, attr: str, other_attr: str, axes: tuple[type[MeshAxis], ...], where: str) -> _F:
    if not callable(fn):
        raise TypeError(f"{where} decorates a function (a def), got {fn!r}")
    label = ", ".join(_axis_name(a) for a in axes)
    if getattr(fn, attr, None) is not None:
        raise TypeError(f"{where}: {getattr(fn, '__qualname__', fn)!r} is already decorated with it; decorate once")
    clash = [_axis_name(a) for a in getattr(fn, other_attr, None) or () if a in axes]
    if clash:
        raise TypeError(
            f"{where}: {getattr(fn, '__qualname__', fn)!r} is both global and local on {', '.join(clash)}; "
            "pick one mode per axis"
        )
    try:
        setattr(fn, attr, axes)
    except (AttributeError, TypeError) as exc:
        raise TypeError(f"{where} decorates a def; cannot record the axes ({label}) on {fn!r}") from exc
    return fn


def global_spmd(*axes: AxesArg) -> Callable[[_F], _F]:
    """Decorate a ``def`` whose body is global SPMD on ``axes`` (local on every other axis).

    ``@spmd.global_spmd(tp)``: in the body, a ``S(i)@tp`` tensor is a piece of
    one global tensor (per its partition spec), and each operation means its
    global meaning; a contraction over a ``tp``-sharded dim needs
    ``out_partial_axes=tp`` (:mod:`spmd_stubs.ops`) and yields ``P@tp``.
    Several axes: ``@global_spmd(dp, tp)`` (or ``@global_spmd((dp, tp))``).

    Runtime: validates the axes now (``TypeError`` for anything but
    ``MeshAxis`` subclasses or tuples of them, a ``ValueError`` for an axis
    named twice: :func:`check_axes`), records them as
    ``fn.__spmd_global_axes__`` and returns ``fn`` itself.
    """
    checked = check_axes(axes, "global_spmd(...)")

    def decorate(fn: _F) -> _F:
        return _mark(fn, GLOBAL_ATTR, LOCAL_ATTR, checked, "global_spmd(...)")

    return decorate


def local_map(*axes: AxesArg) -> Callable[[_F], _F]:
    """Decorate a ``def`` (nested in a global one) whose body is local SPMD on ``axes``.

    ``@spmd.local_map(ep)``: inside, the partition specs on ``ep`` are
    forgotten (``S(i)@ep`` reads as ``V@ep``) and operations have their
    per-rank meaning, as in ``shard_map``; the other axes keep the mode of
    the enclosing def.  The declared parameter and return types are the
    boundary: the result re-enters global SPMD with the partition spec its
    annotation states.

    Runtime: validates the axes now, records them as
    ``fn.__spmd_local_axes__`` and returns ``fn`` itself.
    """
    checked = check_axes(axes, "local_map(...)")

    def decorate(fn: _F) -> _F:
        return _mark(fn, LOCAL_ATTR, GLOBAL_ATTR, checked, "local_map(...)")

    return decorate


def global_axes_of(fn: object) -> tuple[type[MeshAxis], ...]:
    """The axes ``fn`` was decorated ``@global_spmd`` with (``()`` if none)."""
    return tuple(getattr(fn, GLOBAL_ATTR, None) or ())


def local_axes_of(fn: object) -> tuple[type[MeshAxis], ...]:
    """The axes ``fn`` was decorated ``@local_map`` with (``()`` if none)."""
    return tuple(getattr(fn, LOCAL_ATTR, None) or ())
