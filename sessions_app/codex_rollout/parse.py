"""Reading Codex rollout JSON Lines (spec §15, §1.5).

A rollout line is `{"timestamp": "...", "ordinal"?: n, "type": <kind>, "payload": {...}}`. Parsing is all or
nothing: every malformed line is collected with its 1-based line number, and if there is any the whole file is
refused with `RolloutImportError`, so an importer never writes half a session. Unknown kinds are skipped and
counted, as Codex's own reader skips them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from compaction_app.engine.items import normalize_kind

# Kinds this module validates and keeps (spec §15).
SESSION_META = "session_meta"
RESPONSE_ITEM = "response_item"
COMPACTED = "compacted"
TURN_CONTEXT = "turn_context"
EVENT_MSG = "event_msg"
HISTORY_KINDS = frozenset({SESSION_META, RESPONSE_ITEM, COMPACTED, TURN_CONTEXT, EVENT_MSG})
# Newer kinds that are recognised (kept in the parse, counted) but play no part in history rebuilding here.
RECOGNISED_UNUSED_KINDS = frozenset(
    {
        "world_state",
        "inter_agent_communication",
        "inter_agent_communication_metadata",
        "security_risk_score",
        "rollout_reference",
    }
)
KNOWN_KINDS = HISTORY_KINDS | RECOGNISED_UNUSED_KINDS

# EventMsg types the rebuild looks at. Codex serialises TurnStarted/TurnComplete as `task_started` /
# `task_complete` and accepts the `turn_*` spellings as aliases; both are accepted here.
TURN_STARTED_TYPES = frozenset({"turn_started", "task_started"})
TURN_COMPLETE_TYPES = frozenset({"turn_complete", "task_complete"})
TURN_ABORTED = "turn_aborted"
USER_MESSAGE = "user_message"
THREAD_ROLLED_BACK = "thread_rolled_back"

WINDOW_FIELDS = ("window_number", "window_id", "previous_window_id", "first_window_id")


class RolloutImportError(ValueError):
    """A rollout that cannot be imported; `errors` lists every bad line as (1-based line number, message)."""

    def __init__(self, errors: list[tuple[int, str]], *, source_name: str = "") -> None:
        self.errors = list(errors)
        self.source_name = source_name
        first_no, first_msg = self.errors[0]
        text = f"line {first_no}: {first_msg}"
        extra = []
        if source_name:
            extra.append(f"in {source_name}")
        if len(self.errors) > 1:
            more = len(self.errors) - 1
            extra.append(f"{more} more bad line{'s' if more > 1 else ''}")
        if extra:
            text += f" ({'; '.join(extra)})"
        super().__init__(text)


@dataclass(frozen=True)
class RolloutLine:
    """One accepted line: `payload` is validated and, for `compacted`, normalised (legacy window id)."""

    line_no: int
    timestamp: str
    kind: str
    payload: Any
    ordinal: int | None = None

    @property
    def event_type(self) -> str | None:
        if self.kind == EVENT_MSG:
            return self.payload.get("type")
        return None


@dataclass(frozen=True)
class ParsedRollout:
    """A whole rollout file, accepted.

    `lines` keeps every line of a known kind in file order (unknown kinds are not kept);
    `kind_counts` counts every kind seen, `skipped_kinds` only the unknown ones.
    """

    source_name: str
    lines: list[RolloutLine]
    session_meta: dict[str, Any] | None
    kind_counts: dict[str, int] = field(default_factory=dict)
    skipped_kinds: dict[str, int] = field(default_factory=dict)

    @property
    def skipped_count(self) -> int:
        return sum(self.skipped_kinds.values())


class _Malformed(Exception):
    pass


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_item(item: Any, where: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise _Malformed(f"{where} must be an object")
    if not isinstance(item.get("type"), str) or not item["type"]:
        raise _Malformed(f"{where} has no string `type`")
    return normalize_kind(item)


def _check_optional_str(payload: dict[str, Any], key: str, kind: str) -> None:
    if payload.get(key) is not None and not isinstance(payload[key], str):
        raise _Malformed(f"{kind}.{key} must be a string")


def _normalise_compacted(payload: dict[str, Any]) -> dict[str, Any]:
    """Validate a CompactedItem and map a legacy numeric `window_id` to `window_number` (spec §1.5)."""
    if not isinstance(payload.get("message"), str):
        raise _Malformed("compacted.message must be a string")
    out = {k: v for k, v in payload.items() if v is not None}
    history = payload.get("replacement_history")
    if history is not None:
        if not isinstance(history, list):
            raise _Malformed("compacted.replacement_history must be a list of items")
        out["replacement_history"] = [
            _check_item(item, f"compacted.replacement_history[{i}]") for i, item in enumerate(history)
        ]
    window_number = payload.get("window_number")
    if window_number is not None and not (_is_int(window_number) and window_number >= 0):
        raise _Malformed("compacted.window_number must be a non-negative integer")
    window_id = payload.get("window_id")
    if _is_int(window_id):
        if window_id < 0:
            raise _Malformed("compacted.window_id must be a string or a non-negative integer")
        # Legacy rollouts wrote the window number into window_id.
        del out["window_id"]
        out.setdefault("window_number", window_id)
    elif window_id is not None and not isinstance(window_id, str):
        raise _Malformed("compacted.window_id must be a string or a non-negative integer")
    for key in ("previous_window_id", "first_window_id"):
        _check_optional_str(payload, key, COMPACTED)
    return out


def _check_event(payload: dict[str, Any]) -> dict[str, Any]:
    event_type = payload.get("type")
    if not isinstance(event_type, str) or not event_type:
        raise _Malformed("event_msg payload has no string `type`")
    if event_type == THREAD_ROLLED_BACK:
        num_turns = payload.get("num_turns")
        if not (_is_int(num_turns) and num_turns >= 0):
            raise _Malformed("event_msg thread_rolled_back.num_turns must be a non-negative integer")
    elif event_type in TURN_STARTED_TYPES | TURN_COMPLETE_TYPES | {TURN_ABORTED}:
        _check_optional_str(payload, "turn_id", f"event_msg {event_type}")
    elif event_type == USER_MESSAGE:
        _check_optional_str(payload, "message", "event_msg user_message")
    return payload


def _check_payload(kind: str, payload: Any) -> Any:
    if kind not in KNOWN_KINDS:
        return payload
    if not isinstance(payload, dict):
        raise _Malformed(f"{kind} payload must be an object")
    if kind == RESPONSE_ITEM:
        return _check_item(payload, "response_item payload")
    if kind == COMPACTED:
        return _normalise_compacted(payload)
    if kind == EVENT_MSG:
        return _check_event(payload)
    if kind == TURN_CONTEXT:
        _check_optional_str(payload, "turn_id", TURN_CONTEXT)
    if kind == SESSION_META and not isinstance(payload.get("id"), str):
        raise _Malformed("session_meta.id must be a string")
    return payload


def _parse_line(raw: str | bytes) -> tuple[str, str, Any, int | None]:
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Malformed(f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise _Malformed(f"invalid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise _Malformed("a rollout line must be a JSON object")
    kind = obj.get("type")
    if not isinstance(kind, str) or not kind:
        raise _Malformed("missing string `type`")
    if "payload" not in obj:
        raise _Malformed(f"{kind} line has no `payload`")
    timestamp = obj.get("timestamp")
    if not isinstance(timestamp, str):
        raise _Malformed("missing string `timestamp`")
    ordinal = obj.get("ordinal")
    if ordinal is not None and not (_is_int(ordinal) and ordinal >= 0):
        raise _Malformed("`ordinal` must be a non-negative integer")
    return kind, timestamp, _check_payload(kind, obj["payload"]), ordinal


def parse_rollout(lines: Iterable[str | bytes], *, source_name: str = "") -> ParsedRollout:
    """Parse and validate a Codex rollout; refuse it whole if any line is malformed (spec §15, §1.5).

    Blank lines are ignored. A final line cut in the middle of its JSON is malformed like any other.
    Raises RolloutImportError listing every bad line; its message starts with the first one (`line 7: ...`).
    """
    kept: list[RolloutLine] = []
    errors: list[tuple[int, str]] = []
    counts: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    session_meta: dict[str, Any] | None = None
    for line_no, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            kind, timestamp, payload, ordinal = _parse_line(raw)
        except _Malformed as exc:
            errors.append((line_no, str(exc)))
            continue
        counts[kind] += 1
        if kind not in KNOWN_KINDS:
            skipped[kind] += 1
            continue
        if kind == SESSION_META and session_meta is None:
            session_meta = payload
        kept.append(RolloutLine(line_no=line_no, timestamp=timestamp, kind=kind, payload=payload, ordinal=ordinal))
    if errors:
        raise RolloutImportError(errors, source_name=source_name)
    return ParsedRollout(
        source_name=source_name,
        lines=kept,
        session_meta=session_meta,
        kind_counts=dict(counts),
        skipped_kinds=dict(skipped),
    )
