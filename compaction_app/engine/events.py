"""Events a compaction publishes, in the order of spec §11. Each has `type` and `to_dict()` for the live UI."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

CONTEXT_COMPACTION_ITEM = "context_compaction"


@dataclass(frozen=True)
class Event:
    type: ClassVar[str] = "event"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **asdict(self)}


@dataclass(frozen=True)
class TurnStarted(Event):
    type: ClassVar[str] = "turn_started"
    turn_id: str
    model_context_window: int | None = None


@dataclass(frozen=True)
class TurnComplete(Event):
    type: ClassVar[str] = "turn_complete"
    turn_id: str


@dataclass(frozen=True)
class TurnAborted(Event):
    """A standalone compaction turn stopped by a hook (Codex TurnAborted, spec §6.5, §7)."""

    type: ClassVar[str] = "turn_aborted"
    turn_id: str
    reason: str = "hook_stopped"


@dataclass(frozen=True)
class ItemStarted(Event):
    type: ClassVar[str] = "item_started"
    item_id: str
    item_type: str = CONTEXT_COMPACTION_ITEM


@dataclass(frozen=True)
class ItemCompleted(Event):
    type: ClassVar[str] = "item_completed"
    item_id: str
    item_type: str = CONTEXT_COMPACTION_ITEM


@dataclass(frozen=True)
class ContextCompacted(Event):
    """The legacy event that accompanies ItemCompleted (spec §1.4)."""

    type: ClassVar[str] = "context_compacted"


@dataclass(frozen=True)
class RawResponseItem(Event):
    """One finished output item of the local summariser (spec §11, manual local)."""

    type: ClassVar[str] = "raw_response_item"
    item: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TokenCount(Event):
    """`source` is "server" (usage of a response) or "estimate" (recomputed after installation, spec §3.2)."""

    type: ClassVar[str] = "token_count"
    total_tokens: int
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    model_context_window: int | None = None
    source: str = "estimate"


@dataclass(frozen=True)
class Warning(Event):
    type: ClassVar[str] = "warning"
    message: str


@dataclass(frozen=True)
class Error(Event):
    type: ClassVar[str] = "error"
    message: str
    codex_error_info: str | None = None
    http_status: int | None = None


@dataclass(frozen=True)
class StreamError(Event):
    type: ClassVar[str] = "stream_error"
    message: str
    codex_error_info: str | None = None
    additional_details: str | None = None


@dataclass(frozen=True)
class HookStarted(Event):
    type: ClassVar[str] = "hook_started"
    name: str
    event: str


@dataclass(frozen=True)
class HookCompleted(Event):
    type: ClassVar[str] = "hook_completed"
    name: str
    event: str
    status: str
    stop_reason: str | None = None


Emit = Callable[[Event], None]


class EventLog:
    """An `emit` that also keeps every event, so the outcome can carry them."""

    def __init__(self, downstream: Emit | None = None) -> None:
        self.events: list[Event] = []
        self._downstream = downstream

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        if self._downstream is not None:
            self._downstream(event)
