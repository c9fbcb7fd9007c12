"""The fix a plan diagnostic proposes: one entry's style changed, checked to make the plan clean.

The candidates change one entry that the mismatch involves, the least
first: an option dropped (its default back), the style of another
colwise/rowwise entry involved, an output layout set to another placement
the plan uses, a colwise style made rowwise or the other way round, an
input layout (by position or by keyword) set, ``use_local_output`` (or
``use_local_input``) flipped.  A candidate after which
the mismatch is gone and no new one appears (checked strictly) is a fix;
the fix is the one that removes the most mismatches (:func:`best_fix`).  A
change torch refuses, or that a module's kind does not take, is none.  A
module the plan gives no style, whose plain parameters meet a shard, gets
an entry added: rowwise or colwise for a linear, ``SequenceParallel`` on a
dim the plan uses, its output a DTensor or local.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterator, Optional, Sequence

from mypy.nodes import Expression

from spmd_mypy.plans.assembled import Entry
from spmd_mypy.plans.literal import Style
from spmd_stubs.core.parallel_styles import FLAGS, OPTIONS, REPLICATE, KeywordLayouts, Placement, shard

Removed = Callable[[Sequence[Entry], str], Optional[int]]
"""How many mismatches a changed plan (its entries, and the key changed) is rid of; None where it still
has this one, has a new one, or its changed entry is not a modelled style."""

_SWAPPED = {"ColwiseParallel": "RowwiseParallel", "RowwiseParallel": "ColwiseParallel"}
_FLAGS = ("use_local_input", "use_local_output", "sequence_dim")

Tier = Callable[[Style, list[Placement]], Iterator[Style]]
"""One kind of change: the styles it makes of a style, given the placements the plan uses."""


def best_fix(keys: Sequence[str], entries: Sequence[Entry], removed: Removed, plan: Expression | None = None
             ) -> Entry | None:
    """The change of one of ``keys``' entries that rids the plan of the most mismatches, the least change
    first among equals (``None``: no change rids it of this one).  With ``plan`` (where an entry is added),
    ``keys[0]`` is a sub-module without an entry, and an entry added for it comes first."""
    by_key = {entry.key: entry for entry in entries}
    layouts = _layouts_in(entries)
    involved = [by_key[key] for key in dict.fromkeys(keys) if key in by_key and by_key[key].style is not None]
    peers = [entry.style for entry in involved if entry.style is not None and entry.style.name in _SWAPPED]
    best: tuple[int, Entry] | None = None
    for added in [Entry(keys[0], style, plan) for style in _added(layouts)] if plan is not None else []:
        count = removed([*entries, added], keys[0])
        if count is not None and (best is None or count > best[0]):
            best = (count, added)
    for tier in (_dropped, _like(peers), _outputs, _swapped, _relaid, _flipped):
        for entry in involved:
            assert entry.style is not None
            for style in tier(entry.style, layouts):
                changed = replace(entry, style=style)
                count = removed([changed if e.key == entry.key else e for e in entries], entry.key)
                if count is not None and (best is None or count > best[0]):
                    best = (count, changed)
    return best[1] if best is not None else None


def _added(layouts: list[Placement]) -> list[Style]:
    """The styles an entry added for a module without one may have: rowwise or colwise (a linear's), then
    ``SequenceParallel`` on each shard dim the plan uses, its output a DTensor, then local."""
    dims = dict.fromkeys(p.dim for p in layouts if p.dim is not None and p.dim != 1)
    styles = [Style("SequenceParallel", ()), *(Style("SequenceParallel", (("sequence_dim", d),)) for d in dims)]
    return [Style("RowwiseParallel", ()), Style("ColwiseParallel", ()), *styles,
            *(style.with_options(use_local_output=True) for style in styles)]


def _layouts_in(entries: Sequence[Entry]) -> list[Placement]:
    """``Replicate()``, the shards the plan names (its sequence dims too), and ``Shard(-1)``."""
    found: list[Placement] = [REPLICATE]
    for entry in entries:
        for name, value in entry.style.options if entry.style is not None else ():
            if name == "sequence_dim" and isinstance(value, int):
                found.append(shard(value))
            items = tuple(p for _, p in value.items) if isinstance(value, KeywordLayouts) else value
            for item in items if isinstance(items, tuple) else (items,):
                if isinstance(item, Placement):
                    found.append(item)
    return list(dict.fromkeys([*found, shard(-1)]))


def _dropped(style: Style, layouts: list[Placement]) -> Iterator[Style]:
    for name, _ in style.options:
        # a PrepareModule* style without its layouts does nothing: never the least change
        if name not in ("input_layouts", "output_layouts", "input_kwarg_layouts") or style.name in _SWAPPED:
            yield style.with_options(**{name: None})


def _like(peers: list[Style]) -> Tier:
    """The style of another colwise/rowwise entry the mismatch involves (``wq`` made like ``wk``)."""
    return lambda style, layouts: (peer for peer in dict.fromkeys(peers) if peer != style and style.name in _SWAPPED)


def _outputs(style: Style, layouts: list[Placement]) -> Iterator[Style]:
    return _relaid(style, layouts, ("output_layouts", "desired_output_layouts"))


def _relaid(style: Style, layouts: list[Placement], names: Sequence[str] = ()) -> Iterator[Style]:
    current = dict(style.options)
    for name in names or OPTIONS[style.name]:
        if name in _FLAGS or name not in OPTIONS[style.name]:
            continue
        value = current.get(name)
        for layout in layouts:
            if isinstance(value, KeywordLayouts):
                for position, (key, placement) in enumerate(value.items):
                    if placement != layout:
                        relaid = (*value.items[:position], (key, layout), *value.items[position + 1:])
                        yield style.with_options(**{name: KeywordLayouts(relaid)})
            elif "kwarg" in name:
                continue  # a keyword input's layout is set where one is written
            elif isinstance(value, tuple):
                for position, item in enumerate(value):
                    if item is not None and item != layout:
                        yield style.with_options(**{name: (*value[:position], layout, *value[position + 1:])})
            elif value != layout:
                yield style.with_options(**{name: layout})


def _swapped(style: Style, layouts: list[Placement]) -> Iterator[Style]:
    other = _SWAPPED.get(style.name)
    if other is None:
        return
    yield Style(other, ())
    for layout in layouts:
        yield Style(other, (("output_layouts", layout),))


def _flipped(style: Style, layouts: list[Placement]) -> Iterator[Style]:
    """``use_local_output`` (and ``use_local_input``) flipped, a flag back at its default dropped."""
    for flag, default in FLAGS[style.name].items():
        flipped = not dict(style.options).get(flag, default)
        yield style.with_options(**{flag: None if flipped == default else flipped})
