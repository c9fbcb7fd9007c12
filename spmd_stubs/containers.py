"""The containers of sub-modules whose items' class is known: what the checker reads a declared container as.

A ``[spmd_mypy] modules`` entry ``OWNER.attr[*]: CLASS`` says every item of
the ``nn.ModuleList`` (``nn.ModuleDict``, ``nn.Sequential``) ``OWNER.attr``
is a ``CLASS``; reading the attribute then gives ``ModuleListOf[CLASS]``
(``ModuleDictOf``, ``SequentialOf``), whose indexing, iteration and
``values()`` give ``CLASS`` (docs/checker.md#layers-swapped-or-built-at-run-time).
At run time each is the torch container itself: only the item types differ,
and only for the checker.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, ValuesView
from typing import TYPE_CHECKING, Generic, TypeVar, overload

from torch import nn

Item = TypeVar("Item", bound=nn.Module)


class ModuleListOf(nn.ModuleList, Generic[Item]):
    """An ``nn.ModuleList`` whose items are ``Item``s."""

    if TYPE_CHECKING:
        @overload
        def __getitem__(self, idx: slice) -> ModuleListOf[Item]: ...
        @overload
        def __getitem__(self, idx: int) -> Item: ...
        def __getitem__(self, idx: int | slice) -> Item | ModuleListOf[Item]: ...
        def __iter__(self) -> Iterator[Item]: ...
        def pop(self, key: int | slice) -> Item: ...


class ModuleDictOf(nn.ModuleDict, Generic[Item]):
    """An ``nn.ModuleDict`` whose values are ``Item``s."""

    if TYPE_CHECKING:
        def __getitem__(self, key: str) -> Item: ...
        def pop(self, key: str) -> Item: ...
        def items(self) -> ItemsView[str, Item]: ...
        def values(self) -> ValuesView[Item]: ...


class SequentialOf(nn.Sequential, Generic[Item]):
    """An ``nn.Sequential`` whose layers are ``Item``s."""

    if TYPE_CHECKING:
        @overload
        def __getitem__(self, idx: slice) -> SequentialOf[Item]: ...
        @overload
        def __getitem__(self, idx: int) -> Item: ...
        def __getitem__(self, idx: int | slice) -> Item | SequentialOf[Item]: ...
        def __iter__(self) -> Iterator[Item]: ...
        def pop(self, key: int | slice) -> Item: ...
