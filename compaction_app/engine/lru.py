"""The one bounded least-recently-used map of the process's caches (rendered live batches and chart states, the
turn's per-session histories and contexts, idle sessions, the simulated model's prompt prefixes), and the same map
with entries that expire (`TtlLru`: the gateway's key and control caches).

Thread-safe: every method takes the map's lock, and `lock` (re-entrant) lets a caller read, compute and write as one
step. Plain Python (floor 1), so the engine, the providers and the stateful rooms share it."""

from __future__ import annotations

import threading
import time
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


class TtlLru(Generic[K, V]):
    """An Lru whose entries also expire `seconds()` after they were put (a callable, read at each put, so a
    setting changed at run time applies to the next entry): the gateway's caches of who a key is and of a
    session's operator controls. `get` answers `default` for a missing or expired entry, so None can be cached
    (an unknown key)."""

    def __init__(self, size: int, *, seconds: Callable[[], float],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._entries: Lru[K, tuple[float, V]] = Lru(size)
        self._seconds = seconds
        self._clock = clock

    def get(self, key: K, default: V | object = None) -> V | object:
        entry = self._entries.get(key)
        if entry is None:
            return default
        if entry[0] <= self._clock():
            self._entries.pop(key)
            return default
        return entry[1]

    def now(self) -> float:
        return self._clock()

    def put(self, key: K, value: V, *, read_at: float | None = None) -> None:
        """Keep `value`, read at `read_at` (default: now), until `seconds()` after it was read."""
        self._entries.put(key, ((self._clock() if read_at is None else read_at) + self._seconds(), value))

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
