"""The live state of a session as a fold over its rollout lines (design: "the rollout is the source of truth").

One function, `apply_line`, is used both for the incremental update after each append and for a full rebuild
from the rollout, so the cached projection and a rebuild agree by construction. Plain Python, no Django.

What each line kind does (spec §8.2 replay, §1.5, §9):
- `session_meta`: sets the base-instruction count, the model and the first window; history unchanged.
- `response_item`: appends the item.
- `compacted` with `replacement_history`: replaces the history, adopts the window fields it carries, clears the
  reference context (the next turn re-injects full context, spec §5.3) and recomputes the meter (spec §3.2).
- `rollback` / `redo` (our kinds): carry the full history they install and replace it the same way.
- `window_opened` (our kind): a new window without a history change (token budget): adopts the window fields.
- `turn_context`: marks the reference context as installed and records the turn's model.
- `event_msg` `token_count`: server usage (or an estimate recompute) for the meter.
- anything else changes nothing. Codex's legacy lines (a `compacted` without replacement history,
  `thread_rolled_back`) are converted by the rollout importer before they are stored; `handlers` lets a caller
  fold extra kinds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from compaction_app.engine import meter as m
from compaction_app.engine.evolve import evolve
from compaction_app.engine.items import Item, normalize_kind

SESSION_META = "session_meta"
RESPONSE_ITEM = "response_item"
COMPACTED = "compacted"
TURN_CONTEXT = "turn_context"
EVENT_MSG = "event_msg"
ROLLBACK = "rollback"
REDO = "redo"
WINDOW_OPENED = "window_opened"
# The `event_msg` a compaction's own model calls are written as: not a `token_count`, so the meter is not moved.
COMPACTION_USAGE = "compaction_usage"
LINE_KINDS = (SESSION_META, RESPONSE_ITEM, COMPACTED, TURN_CONTEXT, EVENT_MSG, ROLLBACK, REDO, WINDOW_OPENED)
HISTORY_INSTALLING_KINDS = (COMPACTED, ROLLBACK, REDO)
# The lines after which a session's compaction state (its last attempt, its status box) is read again: the kinds
# that install a history or open a window, and the event_msg types a failed or interrupted compaction writes.
COMPACTION_STATE_KINDS = frozenset({*HISTORY_INSTALLING_KINDS, WINDOW_OPENED})
COMPACTION_EVENT_TYPES = frozenset({"error", "compaction_interrupted"})
WINDOW_FIELDS = ("window_number", "window_id", "previous_window_id", "first_window_id")


class ProjectionError(ValueError):
    """A line cannot be folded (out of order, or malformed)."""


@dataclass(frozen=True)
class Line:
    """The part of a rollout line the fold reads. `item_tokens` holds one count per replacement-history item."""

    seq: int
    kind: str
    payload: dict[str, Any]
    tokens: int = 0
    item_tokens: list[int] | None = None


@dataclass(frozen=True)
class Entry:
    """One item of the live history with its stored count and the rollout line it came from."""

    item: Item
    tokens: int
    source_seq: int
    model_generated: bool


@dataclass(frozen=True)
class Header:
    """The O(1) part of the live state (cached on the session row)."""

    meter: m.MeterState = field(default_factory=m.MeterState)
    window_number: int = 0
    window_id: str = ""
    previous_window_id: str = ""
    first_window_id: str = ""
    last_seq: int = 0
    compaction_count: int = 0
    reference_context_set: bool = False
    model: str = ""
    item_count: int = 0


@dataclass(frozen=True)
class Appended:
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class Replaced:
    entries: tuple[Entry, ...]


Change = Appended | Replaced | None
Handler = Callable[[Header, Line], tuple[Header, Change]]


def _entry(item: Item, tokens: int, seq: int) -> Entry:
    return Entry(item=item, tokens=tokens, source_seq=seq, model_generated=m.item_flags(item).model_generated)


def _window(header: Header, payload: Mapping[str, Any]) -> Header:
    """Adopt the window fields a line carries; an explicit null id means "none" (a first window has no previous)."""
    updates: dict[str, Any] = {}
    if payload.get("window_number") is not None:
        try:
            updates["window_number"] = int(payload["window_number"])
        except (TypeError, ValueError):  # the line's fault (an edited file), not the fold's
            raise ProjectionError(f"window_number {payload['window_number']!r} is not a number") from None
    for key in ("window_id", "previous_window_id", "first_window_id"):
        if key in payload:
            updates[key] = "" if payload[key] is None else str(payload[key])
    return evolve(header, **updates)


def _installed(header: Header, line: Line) -> tuple[Header, Replaced]:
    history = line.payload.get("replacement_history")
    if not isinstance(history, list):
        raise ProjectionError(f"line {line.seq} ({line.kind}) carries no replacement_history list")
    counts = line.item_tokens
    if counts is None or len(counts) != len(history):
        raise ProjectionError(f"line {line.seq} ({line.kind}) needs one stored token count per replacement item")
    entries = tuple(_entry(normalize_kind(i), int(t), line.seq) for i, t in zip(history, counts, strict=True))
    meter = m.history_replaced(header.meter, ((e.tokens, m.item_flags(e.item)) for e in entries))
    header = evolve(_window(header, line.payload), meter=meter, item_count=len(entries))
    return header, Replaced(entries)


def _session_meta(header: Header, line: Line) -> tuple[Header, Change]:
    # The meter starts from the estimate of the base instructions; the prefill stays unknown until the first
    # server usage (spec §3.4: the first check of a window counts 0 in body_after_prefix scope).
    base = line.tokens
    meter = evolve(header.meter, base_tokens=base, usage_total=base + header.meter.history_tokens, since_model=0)
    header = evolve(_window(header, line.payload), meter=meter, model=str(line.payload.get("model") or header.model))
    return header, None


def _response_item(header: Header, line: Line) -> tuple[Header, Change]:
    entry = _entry(normalize_kind(line.payload), line.tokens, line.seq)
    meter = m.item_appended(header.meter, line.tokens, m.item_flags(entry.item))
    return evolve(header, meter=meter, item_count=header.item_count + 1), Appended((entry,))


def _compacted(header: Header, line: Line) -> tuple[Header, Change]:
    if "replacement_history" not in line.payload:
        raise ProjectionError(
            f"line {line.seq}: a compacted line without replacement_history (legacy Codex format) must be "
            "converted by the rollout importer before it is stored"
        )
    header, change = _installed(header, line)
    return evolve(header, compaction_count=header.compaction_count + 1, reference_context_set=False), change


def _rollback_or_redo(header: Header, line: Line) -> tuple[Header, Change]:
    header, change = _installed(header, line)
    if "reference_context_set" in line.payload:
        header = evolve(header, reference_context_set=bool(line.payload["reference_context_set"]))
    return header, change


def _window_opened(header: Header, line: Line) -> tuple[Header, Change]:
    return evolve(_window(header, line.payload), meter=m.prefill_cleared(header.meter)), None


def _turn_context(header: Header, line: Line) -> tuple[Header, Change]:
    return evolve(header, reference_context_set=True, model=str(line.payload.get("model") or header.model)), None


def _event_msg(header: Header, line: Line) -> tuple[Header, Change]:
    payload = line.payload
    if payload.get("type") != "token_count":
        return header, None
    if payload.get("source") == "estimate":
        return evolve(header, meter=m.recomputed(header.meter)), None
    usage = (payload.get("info") or {}).get("last_token_usage")
    if not isinstance(usage, dict):
        return header, None  # rate-limit-only token_count events carry no usage
    total = int(usage.get("total_tokens") or 0)
    if payload.get("pinned_full"):
        return evolve(header, meter=m.pinned_full(header.meter, usable_window=total)), None
    meter = m.usage_observed(
        header.meter,
        total_tokens=total,
        input_tokens=int(usage.get("input_tokens") or 0),
        reasoning_included=bool(payload.get("reasoning_included")),
    )
    return evolve(header, meter=meter), None


DEFAULT_HANDLERS: dict[str, Handler] = {
    SESSION_META: _session_meta,
    RESPONSE_ITEM: _response_item,
    COMPACTED: _compacted,
    ROLLBACK: _rollback_or_redo,
    REDO: _rollback_or_redo,
    WINDOW_OPENED: _window_opened,
    TURN_CONTEXT: _turn_context,
    EVENT_MSG: _event_msg,
}


def apply_line(header: Header, line: Line, handlers: Mapping[str, Handler] | None = None) -> tuple[Header, Change]:
    """Fold one rollout line into the live state; returns the new header and the change to the history."""
    if line.seq != header.last_seq + 1:
        raise ProjectionError(f"line seq {line.seq} does not follow {header.last_seq}")
    handler = (handlers or DEFAULT_HANDLERS).get(line.kind)
    if handler is None:
        return evolve(header, last_seq=line.seq), None
    header, change = handler(header, line)
    return evolve(header, last_seq=line.seq), change


def fold_items(items: list[Item], lines: Iterable[tuple[str, Mapping[str, Any]]]) -> list[Item]:
    """The fold restricted to the item list, for a caller that keeps items without their tokens or the header (the
    turns' per-process history cache): `items` once `lines` ((kind, payload) pairs) are applied. An item line
    appends in place; a line that installs a history replaces the list with a new one, so a snapshot of the old
    list stays as it was. The same rules as `_response_item` and `_installed` (`Projection.items`)."""
    for kind, payload in lines:
        if kind == RESPONSE_ITEM:
            items.append(normalize_kind(payload))
        elif kind in HISTORY_INSTALLING_KINDS:
            items = [normalize_kind(i) for i in payload.get("replacement_history") or []]
    return items


class Projection:
    """A full fold that also keeps the item list: what a rebuild from the rollout gives."""

    def __init__(self, handlers: Mapping[str, Handler] | None = None) -> None:
        self.handlers = {**DEFAULT_HANDLERS, **(handlers or {})}
        self.header = Header()
        self.entries: list[Entry] = []

    def apply(self, line: Line) -> Change:
        self.header, change = apply_line(self.header, line, self.handlers)
        if isinstance(change, Appended):
            self.entries.extend(change.entries)
        elif isinstance(change, Replaced):
            self.entries = list(change.entries)
        return change

    @classmethod
    def rebuild(cls, lines: Iterable[Line], handlers: Mapping[str, Handler] | None = None) -> Projection:
        projection = cls(handlers)
        for line in lines:
            projection.apply(line)
        return projection

    @property
    def items(self) -> list[Item]:
        return [e.item for e in self.entries]
