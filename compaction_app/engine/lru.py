"""The one bounded least-recently-used map of the process's caches (rendered live batches and chart states, the
turn's per-session histories and contexts, idle sessions, the simulated model's prompt prefixes).

Thread-safe: every method takes the map's lock, and `lock` (re-entrant) lets a caller read, compute and write as one
step. Plain Python (floor 1), so the engine, the providers and the stateful rooms share it."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")
_MISSING = object()


class Lru(Generic[K, V]):
    """At most `size` entries; `put` beyond that drops the least recently used. `get` counts as a use, `peek` does
    not. `keeps(current, new)`: when given, `put` leaves an entry whose current value it answers True for (the
    entry still counts as used)."""

    def __init__(self, size: int, *, keeps: Callable[[V, V], bool] | None = None) -> None:
        self.size = size
        self._keeps = keeps
        self._entries: OrderedDict[K, V] = OrderedDict()
        self.lock = threading.RLock()

    def get(self, key: K) -> V | None:
        with self.lock:
            value = self._entries.get(key, _MISSING)
            if value is _MISSING:
                return None
            self._entries.move_to_end(key)
            return value

    def peek(self, key: K) -> V | None:
        with self.lock:
            return self._entries.get(key)

    def put(self, key: K, value: V) -> None:
        with self.lock:
            current = self._entries.get(key, _MISSING)
            if current is _MISSING or self._keeps is None or not self._keeps(current, value):
                self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def pop(self, key: K) -> V | None:
        with self.lock:
            return self._entries.pop(key, None)

    def clear(self) -> None:
        with self.lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries
