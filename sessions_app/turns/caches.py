"""Per-process caches that let a turn start without reading what this process already knows: the live history,
the previous turn's context (both valid for one `last_seq` of their session and followed along its appends) and
the copy of a session its last turn left (`idle_sessions`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from compaction_app.engine.history_snapshot import HistorySnapshot
from compaction_app.engine.items import Item
from compaction_app.engine.lru import Lru
from sessions_app.models import RolloutLine, Session
from sessions_app.rollout import selectors
from sessions_app.rollout.projection import TURN_CONTEXT, fold_items

MAX_CATCH_UP_LINES = 2_000  # a cached value this far behind its session is followed along; further, read again
V = TypeVar("V")


class SeqKeyedCache(ABC, Generic[V]):
    """Per-session values of recently active sessions, each valid for exactly one `last_seq` (LRU, thread-safe).

    A turn's own appends carry an entry forward (`appended`). A line appended by anyone else (an API message,
    another worker running the session's last step: a fleet's steps go to any worker) moves the session's
    `last_seq` past the entry; `caught_up` then follows the entry along the lines appended since, read by seq
    range, so the next turn reads what is new, not the whole history again."""

    def __init__(self, size: int = 256) -> None:
        self._entries: Lru[int, tuple[int, V]] = Lru(size)

    def _lookup(self, session_id: int, last_seq: int) -> tuple[bool, V | None]:
        with self._entries.lock:
            entry = self._entries.peek(session_id)
            if entry is None or entry[0] != last_seq:
                return False, None
            self._entries.get(session_id)  # a use
            return True, entry[1]

    def put(self, session_id: int, last_seq: int, value: V) -> None:
        self._entries.put(session_id, (last_seq, value))

    def appended(self, session_id: int, *, before_seq: int, after_seq: int, rows: Sequence[RolloutLine]) -> None:
        """Lines `before_seq`+1..`after_seq` (`rows`) were appended: follow along. An entry at another seq is left
        as it is: the rollout is append-only, so it stays the value at its own seq, which `caught_up` follows
        from."""
        with self._entries.lock:
            entry = self._entries.peek(session_id)
            if entry is None or entry[0] != before_seq:
                return
            self._entries.put(session_id, (after_seq, self._follow(entry[1], rows)))

    def caught_up(self, session_id: int, last_seq: int) -> tuple[bool, V | None]:
        """(True, the value at `last_seq`): the entry, or an entry at most MAX_CATCH_UP_LINES behind followed along
        the lines appended since (one range read, outside the lock; the entry is followed only if nobody moved it
        meanwhile); (False, None) when there is no such entry."""
        entry = self._entries.peek(session_id)
        if entry is None or not 0 <= last_seq - entry[0] <= MAX_CATCH_UP_LINES:
            return False, None
        if entry[0] == last_seq:
            return self._lookup(session_id, last_seq)
        rows = selectors.lines_between(session_id=session_id, after_seq=entry[0], upto_seq=last_seq)
        if len(rows) != last_seq - entry[0]:  # not every line is there to read: read the value in full
            return False, None
        with self._entries.lock:
            if self._entries.peek(session_id) is not entry:
                return False, None
            value = self._follow(entry[1], rows)
            self._entries.put(session_id, (last_seq, value))
            return True, value

    def forget(self, session_id: int) -> None:
        self._entries.pop(session_id)

    def clear(self) -> None:
        self._entries.clear()

    @abstractmethod
    def _follow(self, value: V, rows: Sequence[RolloutLine]) -> V:
        """`value` once `rows` are appended."""


class HistoryCache(SeqKeyedCache[list[Item]]):
    """Live histories: a session's model-visible items. The cached list only ever grows in place (a new history
    replaces it), so `get` hands out a `HistorySnapshot` of it: an O(1) request input that later appends do not
    change."""

    def get(self, session_id: int, last_seq: int) -> HistorySnapshot | None:
        found, items = self._lookup(session_id, last_seq)
        return HistorySnapshot(items) if found else None

    def _follow(self, value: list[Item], rows: Sequence[RolloutLine]) -> list[Item]:
        return fold_items(value, ((r.kind, r.payload) for r in rows))


history_cache = HistoryCache()


class TurnContextCache(SeqKeyedCache[dict[str, Any] | None]):
    """The previous turn's context (`previous_turn_context`): a turn's own appends carry it forward or replace it
    with the turn's own `turn_context`, so the next turn of a session this process ran reads no rollout line for
    it."""

    def get(self, session_id: int, last_seq: int) -> tuple[bool, dict[str, Any] | None]:
        return self._lookup(session_id, last_seq)

    def _follow(self, value: dict[str, Any] | None, rows: Sequence[RolloutLine]) -> dict[str, Any] | None:
        for row in rows:
            if row.kind == TURN_CONTEXT and isinstance(row.payload, dict) and "context_window" in row.payload:
                value = row.payload
        return value


turn_context_cache = TurnContextCache()


class IdleSessions:
    """Sessions whose last turn this process ran, as that turn's last write left them (header current, provider
    and policy loaded), with the stamp of the configuration they were read with: the next own-lease turn of such a
    session starts without reading it, and its first write, which takes the lease, checks under the row lock that
    the rollout, the lease and the configuration are still what this copy says (else the turn reads the session
    again and starts over; nothing was written). A copy is taken out while a turn uses it (LRU, thread-safe)."""

    def __init__(self, size: int = 256) -> None:
        self._entries: Lru[int, tuple[Session, selectors.ConfigStamp]] = Lru(size)

    def take(self, session_id: int) -> tuple[Session, selectors.ConfigStamp] | None:
        return self._entries.pop(session_id)

    def put(self, session: Session, stamp: selectors.ConfigStamp) -> None:
        self._entries.put(session.pk, (session, stamp))

    def clear(self) -> None:
        self._entries.clear()


idle_sessions = IdleSessions()
