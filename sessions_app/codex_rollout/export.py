"""Writing a compactweb rollout as Codex rollout JSON Lines (spec §15, §1.5).

Output: a `session_meta` line first, then one line per compactweb line, each
`{"timestamp": "<UTC, milliseconds, Z>", "type": <kind>, "payload": {...}}`, compact JSON, newline-terminated.

- `response_item`, `turn_context` and `event_msg` lines are written as they are.
- `compacted` lines keep only CompactedItem fields (`message`, `replacement_history`, `window_number`,
  `window_id`, `previous_window_id`, `first_window_id`), null ones omitted. One that carries the operator's
  `extra_instructions` is followed by a `compactweb_line` event of kind `compacted` carrying them, which the
  importer merges back into the line.
- compactweb-only kinds have no Codex equivalent. A kind whose payload carries a `replacement_history`
  (`rollback`, `redo`) changes the history, so it is written as a `compacted` line with `message: ""`, that
  replacement history and the payload's window fields: Codex's own resume installs a compacted line's
  replacement history verbatim, so it resumes to the same state compactweb shows. It is followed by an
  `event_msg` of type `compactweb_line` carrying the original kind, seq and the rest of the payload (who, when,
  why). Any other compactweb kind is written as that `event_msg` alone. Codex readers skip event types they do
  not know, and compactweb's importer keeps it as an inert event.
- An `event_msg` `thread_rolled_back` is written as a `compactweb_line` event too: compactweb's projection never
  applied it (an imported Codex rollback is a `rollback` line), so Codex must not apply it either.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from sessions_app.codex_rollout.parse import (
    COMPACTED,
    EVENT_MSG,
    EXTRA_INSTRUCTIONS,
    RESPONSE_ITEM,
    SESSION_META,
    THREAD_ROLLED_BACK,
    TURN_CONTEXT,
    WINDOW_FIELDS,
)

ORIGINATOR = "compactweb"
COMPACTWEB_EVENT = "compactweb_line"
_PASSTHROUGH_KINDS = frozenset({RESPONSE_ITEM, TURN_CONTEXT, EVENT_MSG})


class RolloutExportError(ValueError):
    """A compactweb rollout line that cannot be written in Codex's format."""


def format_timestamp(value: datetime | str) -> str:
    """ISO-8601 UTC with milliseconds and `Z`, as Codex writes it (spec §15). Naive datetimes are taken as UTC."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise RolloutExportError(f"timestamp {value!r} is not ISO-8601") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def _dump(timestamp: str, kind: str, payload: Any, ordinals: Iterator[int] | None = None) -> str:
    line: dict[str, Any] = {"timestamp": timestamp}
    if ordinals is not None:
        line["ordinal"] = next(ordinals)
    line.update({"type": kind, "payload": payload})
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"


def _session_meta_payload(meta: dict[str, Any], timestamp: str) -> dict[str, Any]:
    thread_id = meta.get("id")
    if not isinstance(thread_id, str) or not thread_id:
        raise RolloutExportError("session_meta needs the thread id as `id`")
    base = meta.get("base_instructions")
    if isinstance(base, str):
        base = {"text": base}
    payload = {
        "id": thread_id,
        "timestamp": timestamp,
        "cwd": meta.get("cwd", ""),
        "originator": ORIGINATOR,
        "cli_version": meta.get("cli_version", ""),
        "source": meta.get("source", "unknown"),
        "model_provider": meta.get("model_provider"),
        "base_instructions": base,
    }
    return {k: v for k, v in payload.items() if v is not None}


def _compacted_payload(payload: dict[str, Any], seq: Any) -> dict[str, Any]:
    history = payload.get("replacement_history")
    if not isinstance(history, list):
        raise RolloutExportError(f"line seq {seq}: a compacted line needs its replacement_history")
    message = payload.get("message") or ""
    out: dict[str, Any] = {"message": message, "replacement_history": history}
    for key in WINDOW_FIELDS:
        if payload.get(key) is not None:
            out[key] = payload[key]
    return out


def _marker_event(kind: str, seq: Any, payload: Any) -> dict[str, Any]:
    rest = {k: v for k, v in payload.items() if k != "replacement_history"} if isinstance(payload, dict) else payload
    return {"type": COMPACTWEB_EVENT, "kind": kind, "seq": seq, "payload": rest}


def export_lines(
    lines: Iterable[dict[str, Any]],
    *,
    session_meta: dict[str, Any] | None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    first_ordinal: int | None = None,
) -> Iterator[str]:
    """Yield a compactweb rollout as Codex rollout JSON Lines, session_meta first (spec §15).

    `lines` are compactweb rollout lines `{seq, timestamp, kind, payload}` in seq order. `session_meta` gives
    `id` (the thread id, required), and optionally `timestamp`, `cwd`, `cli_version`, `source`,
    `model_provider`, `base_instructions` (text or `{"text": ...}`). Without a timestamp the session starts at
    its first line's, or `now()` for an empty rollout. `session_meta=None` writes no session_meta line (the
    continuation of a file that has one); `first_ordinal` numbers the lines from there, as newer Codex does.
    """
    ordinals = itertools.count(first_ordinal) if first_ordinal is not None else None
    iterator = iter(lines)
    first = next(iterator, None)
    if session_meta is not None:
        started = format_timestamp(
            session_meta.get("timestamp") or (first["timestamp"] if first is not None else now()))
        yield _dump(started, SESSION_META, _session_meta_payload(session_meta, started), ordinals)
    if first is None:
        return
    for line in itertools.chain([first], iterator):
        kind, payload, seq = line["kind"], line["payload"], line.get("seq")
        timestamp = format_timestamp(line["timestamp"])
        if kind == EVENT_MSG and isinstance(payload, dict) and payload.get("type") == THREAD_ROLLED_BACK:
            yield _dump(timestamp, EVENT_MSG, _marker_event(kind, seq, payload), ordinals)
        elif kind in _PASSTHROUGH_KINDS:
            yield _dump(timestamp, kind, payload, ordinals)
        elif kind == COMPACTED:
            yield _dump(timestamp, COMPACTED, _compacted_payload(payload, seq), ordinals)
            if isinstance(payload, dict) and payload.get(EXTRA_INSTRUCTIONS):
                extra = {EXTRA_INSTRUCTIONS: payload[EXTRA_INSTRUCTIONS]}
                yield _dump(timestamp, EVENT_MSG, _marker_event(kind, seq, extra), ordinals)
        elif kind == SESSION_META:
            continue
        else:
            if isinstance(payload, dict) and isinstance(payload.get("replacement_history"), list):
                yield _dump(timestamp, COMPACTED, _compacted_payload({**payload, "message": ""}, seq), ordinals)
            yield _dump(timestamp, EVENT_MSG, _marker_event(kind, seq, payload), ordinals)
