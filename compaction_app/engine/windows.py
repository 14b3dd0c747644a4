"""Context-window ids (spec §9): a window advances only when a compaction succeeds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import uuid6


def new_window_id() -> str:
    """A fresh UUIDv7 string (spec §9)."""
    return str(uuid6.uuid7())


@dataclass(frozen=True)
class WindowState:
    number: int
    window_id: str
    first_window_id: str
    previous_window_id: str | None = None

    @classmethod
    def start(cls, new_id: Callable[[], str] = new_window_id) -> WindowState:
        """Session start: window 0, first id = current id, no previous (spec §9)."""
        window_id = new_id()
        return cls(number=0, window_id=window_id, first_window_id=window_id, previous_window_id=None)

    def advance(self, new_id: Callable[[], str] = new_window_id) -> WindowState:
        """The window after a successful compaction: number + 1, previous = old id, fresh id, same first id."""
        return WindowState(
            number=self.number + 1,
            window_id=new_id(),
            first_window_id=self.first_window_id,
            previous_window_id=self.window_id,
        )

    def correlation_id(self, thread_id: str) -> str:
        """spec §9: `x-codex-window-id = "<thread_id>:<window_number>"`."""
        return f"{thread_id}:{self.number}"

    def compacted_fields(self) -> dict:
        """The window fields written into a CompactedItem (spec §1.5); None values are omitted."""
        fields = {
            "window_number": self.number,
            "first_window_id": self.first_window_id,
            "previous_window_id": self.previous_window_id,
            "window_id": self.window_id,
        }
        return {k: v for k, v in fields.items() if v is not None}
