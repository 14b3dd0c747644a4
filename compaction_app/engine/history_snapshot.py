"""A request's input as a view of a history that only grows, so handing it to a model client costs O(1).

A session's live history changes in two ways only: a turn appends items to it (in place), or something else (a
compaction, a rollback, an import) replaces it with a new list. A `HistorySnapshot` is the first `n` items of such a
list: appends after it was taken are past its end, so it stays exactly what it was, and taking one copies nothing.

Two snapshots of the same list are a prefix of one another by construction, which is what the embedded simulated
model needs to recognise a repeated input in O(1) (`extends`) instead of comparing (and copying) the whole prefix.

The owner of the list promises never to change, remove or reorder items below any snapshot's end; the only writer
is the process's history cache (`sessions_app.turns.caches.HistoryCache`), which only extends or replaces.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any, overload

Item = dict[str, Any]


class HistorySnapshot(Sequence[Item]):
    """The first `len(self)` items of an append-only list, read-only (a `Sequence`, not a `list`)."""

    __slots__ = ("_base", "_n")

    def __init__(self, base: list[Item], n: int | None = None) -> None:
        self._base = base
        self._n = len(base) if n is None else n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> Item: ...

    @overload
    def __getitem__(self, index: slice) -> list[Item]: ...

    def __getitem__(self, index: int | slice) -> Item | list[Item]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._n)
            return self._base[start:stop:step]
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError("history snapshot index out of range")
        return self._base[index]

    def __iter__(self) -> Iterator[Item]:
        if self._n == len(self._base):
            return iter(self._base)
        return islice(self._base, self._n)

    def __reversed__(self) -> Iterator[Item]:
        if self._n == len(self._base):
            return reversed(self._base)
        return (self._base[i] for i in range(self._n - 1, -1, -1))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, HistorySnapshot):
            if other._base is self._base:
                return other._n == self._n
            return other._n == self._n and self.to_list() == other.to_list()
        if isinstance(other, list):
            return len(other) == self._n and self.to_list() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a list, so unhashable like one

    def __repr__(self) -> str:
        return f"HistorySnapshot({self._n} items)"

    def extends(self, other: Sequence[Item]) -> bool:
        """Whether `other` is a snapshot of the same list no longer than this one: then its items are this one's
        first `len(other)`, known without looking at them. False says nothing (compare the items)."""
        return isinstance(other, HistorySnapshot) and other._base is self._base and other._n <= self._n

    def to_list(self) -> list[Item]:
        """A plain list of the items (a copy), for a JSON encoder or a caller that needs a list."""
        return self._base[: self._n]


def as_list(items: Sequence[Item]) -> list[Item]:
    """`items` as a list JSON encoders take: a snapshot is copied, a list is returned as it is."""
    return items.to_list() if isinstance(items, HistorySnapshot) else items  # type: ignore[return-value]
