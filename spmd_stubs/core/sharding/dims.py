"""Single-operand ops that reduce, act along, move or reshape dims (docs/spec.md#global-spmd).

The sharded dim of the data operand must survive the op whole: a reduction
over it is a contraction (a pending reduction where the call names the axis
in ``out_partial_axes``), and computing along it, merging it or removing it
is an error.  ``.T`` and ``.t()`` are read as the 2-D transpose (torch
deprecates ``.T`` on other ranks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from spmd_stubs.core.axis_types import AxisType, Kind, Operand
from spmd_stubs.core.errors import SpmdTypeError
from spmd_stubs.core.sharding.errors import (
    SpmdForm,
    contraction,
    first_shard,
    gather_fix,
    mismatch,
    needless_partial,
    raise_error,
)
from spmd_stubs.core.sharding.readings import (
    Build,
    DimMap,
    Invalid,
    fewest,
    inserted,
    maps,
    ndims,
    norm_or_invalid,
    unary,
)


def dims_text(dims: Sequence[int]) -> str:
    return str(dims[0]) if len(dims) == 1 else f"({', '.join(map(str, dims))})"


@dataclass(frozen=True)
class Reduce:
    """A reduction over ``dims`` (None: every dim), keeping them as size 1 when ``keepdim``.

    ``partial`` is the pending reduction a sharded reduced dim leaves when
    the call names the axis in ``out_partial_axes`` (None: the op cannot);
    ``spmd`` the ``spmd.*`` form a fix names.
    """

    dims: tuple[int, ...] | None = None
    keepdim: bool = False
    partial: str | None = None
    spmd: SpmdForm | None = None

    def rule(self, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
        shard = first_shard(operands)
        dims = self.dims or ()
        result = unary(
            operands,
            axis,
            op,
            maps(self._dim_map),
            ndims(*dims, shard.shard or 0, minimum=fewest(dims)),
            "every dim" if self.dims is None else f"dim={dims_text(self.dims)}",
            lambda: contraction(op, axis, operands, partial, "reduces over", self.partial, self.spmd),
            lambda: mismatch(op, axis, operands, "internal: a reduced dim vanished", "report it"),
        )
        if partial is not None and result.kind is not Kind.P:
            raise needless_partial(op, axis, operands)
        return result

    def _dim_map(self, n: int) -> list[DimMap]:
        reduced = set(range(n)) if self.dims is None else {norm_or_invalid(k, n) for k in self.dims}
        if self.keepdim:
            return [DimMap(n, {i: i for i in range(n) if i not in reduced}, reduced=frozenset(reduced))]
        kept = [i for i in range(n) if i not in reduced]
        return [DimMap(len(kept), {i: p for p, i in enumerate(kept)}, reduced=frozenset(reduced))]


@dataclass(frozen=True)
class Along:
    """An op that keeps the shape but computes along ``dims`` (softmax, cumsum, sort, flip).

    The sharded dim must not be one of them: along it, each rank would see only
    its piece.
    """

    dims: tuple[int, ...]

    def rule(self, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
        if partial is not None:
            raise needless_partial(op, axis, operands)
        shard = first_shard(operands)

        def build(n: int) -> list[DimMap]:
            acted = {norm_or_invalid(k, n) for k in self.dims}
            return [DimMap(n, {i: i for i in range(n) if i not in acted}, touched=frozenset(acted))]

        def touched() -> SpmdTypeError:
            return mismatch(
                op,
                axis,
                operands,
                f"it computes along dim {dims_text(self.dims)}, which is the sharded dim {shard.shard}: each rank "
                "sees only its piece of that dim, so the local result is not the global one",
                gather_fix(axis, shard),
            )

        return unary(
            operands,
            axis,
            op,
            maps(build),
            ndims(*self.dims, shard.shard or 0, minimum=fewest(self.dims)),
            f"dim={dims_text(self.dims)}",
            lambda: raise_error(touched()),
            touched,
        )


def moving(
    operands: Sequence[Operand],
    axis: str,
    op: str,
    partial: str | None,
    build: Build,
    dims: Sequence[int],
    dims_text: str,
    minimum: int = 1,
    maximum: int | None = None,
    like_back: bool = False,
) -> AxisType:
    """Ops that only move dims around (transpose, permute, movedim, unsqueeze, squeeze, flatten).

    The input ndims read run from ``minimum`` to ``maximum`` (default: a few
    past the dims named).
    """
    if partial is not None:
        raise needless_partial(op, axis, operands)
    shard = first_shard(operands)

    def touched() -> SpmdTypeError:
        return mismatch(
            op,
            axis,
            operands,
            f"it merges or removes the sharded dim {shard.shard} in a way whose pieces are not "
            "contiguous pieces of the global result",
            gather_fix(axis, shard),
        )

    tried = ndims(*dims, shard.shard or 0, minimum=minimum) if maximum is None else range(minimum, maximum + 1)
    return unary(operands, axis, op, maps(build), tried, dims_text, lambda: raise_error(touched()), touched, like_back)


@dataclass(frozen=True)
class Transpose:
    """``transpose(dim0, dim1)`` / ``swapaxes``; ``matrix=True`` for ``.T`` / ``.t()`` (2-D)."""

    dim0: int
    dim1: int
    matrix: bool = False

    def rule(self, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
        if self.matrix:
            # The result of .T is mostly a matmul operand, whose dims count from the back.
            return moving(
                operands, axis, op, partial, self._dim_map, (0, 1), "a matrix transpose", 2, maximum=2, like_back=True
            )
        dims = (self.dim0, self.dim1)
        return moving(operands, axis, op, partial, self._dim_map, dims, f"dims {dims}", fewest(dims))

    def _dim_map(self, n: int) -> list[DimMap]:
        i, j = norm_or_invalid(self.dim0, n), norm_or_invalid(self.dim1, n)
        order = list(range(n))
        order[i], order[j] = order[j], order[i]
        return [DimMap(n, {src: dst for dst, src in enumerate(order)})]


@dataclass(frozen=True)
class Permute:
    """``permute(dims)``."""

    dims: tuple[int, ...]

    def rule(self, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
        n = len(self.dims)
        return moving(operands, axis, op, partial, self._dim_map, self.dims, f"dims {tuple(self.dims)}", n, maximum=n)

    def _dim_map(self, n: int) -> list[DimMap]:
        if len(self.dims) != n:
            raise Invalid(n)
        order = [norm_or_invalid(k, n) for k in self.dims]
        return [DimMap(n, {src: dst for dst, src in enumerate(order)})]


@dataclass(frozen=True)
class Movedim:
    """``movedim(source, destination)``."""

    source: tuple[int, ...]
    destination: tuple[int, ...]

    def rule(self, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
        dims = (*self.source, *self.destination)
        text = f"source={tuple(self.source)}, destination={tuple(self.destination)}"
        return moving(operands, axis, op, partial, self._dim_map, dims, text, fewest(dims))

    def _dim_map(self, n: int) -> list[DimMap]:
        src = [norm_or_invalid(k, n) for k in self.source]
        dst = [norm_or_invalid(k, n) for k in self.destination]
        if len(src) != len(dst):
            raise Invalid(n)
        order: list[int | None] = [None] * n
        for s, t in zip(src, dst):
            order[t] = s
        rest = iter(i for i in range(n) if i not in src)
        filled = [next(rest) if o is None else o for o in order]
        return [DimMap(n, {s: t for t, s in enumerate(filled)})]


@dataclass(frozen=True)
class Unsqueeze:
    dim: int

    def rule(self, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
        minimum = max(1, self.dim, -self.dim - 1)  # the input has one dim fewer than the result
        return moving(operands, axis, op, partial, inserted(self.dim), (self.dim,), f"dim={self.dim}", minimum)


@dataclass(frozen=True)
class Squeeze:
    """``squeeze(dims)``; None: every size-1 dim (which ones is known only at runtime)."""

    dims: tuple[int, ...] | None

    def rule(self, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
        if self.dims is None:
            raise mismatch(
                op,
                axis,
                operands,
                "squeeze() removes every size-1 dim, and which dims those are is known only at runtime",
                "pass the dim to squeeze (squeeze(dim)), with the same counting as the shard dim",
            )
        squeezed = self.dims

        def build(n: int) -> list[DimMap]:
            named = sorted({norm_or_invalid(k, n) for k in squeezed})
            dim_maps = []
            # Each named dim is removed only if its size is 1: both readings.
            for mask in range(1 << len(named)):
                removed = {k for bit, k in enumerate(named) if mask >> bit & 1}
                kept = [i for i in range(n) if i not in removed]
                dim_maps.append(DimMap(len(kept), {i: p for p, i in enumerate(kept)}, touched=frozenset(named)))
            return dim_maps

        return moving(operands, axis, op, partial, build, squeezed, f"dim={dims_text(squeezed)}", fewest(squeezed))


@dataclass(frozen=True)
class Flatten:
    start: int = 0
    end: int = -1

    def rule(self, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
        dims = (self.start, self.end)
        text = f"start_dim={self.start}, end_dim={self.end}"
        return moving(operands, axis, op, partial, self._dim_map, dims, text, fewest(dims))

    def _dim_map(self, n: int) -> list[DimMap]:
        s, e = norm_or_invalid(self.start, n), norm_or_invalid(self.end, n)
        if s > e:
            raise Invalid(n)
        positions = {i: (i if i <= s else i - (e - s)) for i in range(n) if not s < i <= e}
        return [DimMap(n - (e - s), positions, touched=frozenset(range(s + 1, e + 1)))]


@dataclass(frozen=True)
class View:
    """``view`` / ``reshape`` to ``ndim`` dims (None: unknown), of which the plugin proved

    the first ``prefix`` to be the input's first dims (``x.shape[0]``...) and
    the last ``suffix`` the input's last dims.  With ``ndim == suffix + 1``
    the first output dim is the product of the input's leading dims not in
    the suffix.
    """

    prefix: int = 0
    suffix: int = 0
    ndim: int | None = None

    def rule(self, operands: Sequence[Operand], axis: str, op: str, partial: str | None) -> AxisType:
        if partial is not None:
            raise needless_partial(op, axis, operands)
        shard = first_shard(operands)
        d = shard.shard
        assert d is not None
        if self._keeps(d):
            return shard
        raise mismatch(
            op,
            axis,
            operands,
            f"the checker cannot show that the new shape keeps the sharded dim {d} (it proves only dims "
            f"written as x.shape[i] / x.size(i) at the same place, from the front for S(i), from the back "
            f"for S(-i))",
            f"write the kept dims as x.shape[...] in the new shape, or {gather_fix(axis, shard)}",
        )

    def _keeps(self, d: int) -> bool:
        if 0 <= d < self.prefix or (d < 0 and -d <= self.suffix):
            return True
        # The leading dims (the sharded one first) merge into the first: each rank's
        # rows are a contiguous block of the merged dim.
        return d == 0 and self.ndim is not None and self.ndim == self.suffix + 1
