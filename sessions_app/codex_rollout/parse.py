"""Reading Codex rollout JSON Lines (spec §15, §1.5).

A rollout line is `{"timestamp": "...", "ordinal"?: n, "type": <kind>, "payload": {...}}`.

Two modes (issue 13, item 1):
- strict: every malformed line is collected with its 1-based line number, and if there is any the whole file is
  refused with `RolloutImportError`. Unknown kinds (with a payload) are skipped and counted.
- tolerant (the default of the importers): as tolerant as Codex's own loader, which skips what it cannot parse
  when it resumes. A line that is not JSON (a truncated last line of a running or crashed session, or garbage
  anywhere), not UTF-8, or a known kind with a malformed payload is skipped; an unknown kind with or without a
  payload is skipped and counted; a missing or invalid timestamp is repaired with the previous line's; NUL
  characters are removed from text (strict refuses them). Valid JSON that a database cannot store (NaN, numbers
  past 64 bits, lone surrogates, deep nesting: `storable`) is a malformed line in both modes. Each is reported as a `LineProblem` (line number, reason, action).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, BinaryIO

from compaction_app.engine.items import normalize_kind
from sessions_app.codex_rollout import storable

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
# compactweb's own field of a `compacted` line: the operator's extra instructions for the summarisation prompt. Not
# a CompactedItem field, so the export carries it in a `compactweb_line` event after the line (export.py).
EXTRA_INSTRUCTIONS = "extra_instructions"


SKIPPED = "skipped"
REPAIRED = "repaired"


@dataclass(frozen=True)
class LineProblem:
    """Something a tolerant read did not take as it was: `action` is `skipped` (the line is not imported) or
    `repaired` (imported after the fix the reason names)."""

    line_no: int
    reason: str
    action: str

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line_no, "reason": self.reason, "action": self.action}


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
    problems: list[LineProblem] = field(default_factory=list)

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


def _is_iso_timestamp(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def strip_nul(value: Any) -> tuple[Any, int]:
    """`value` with every NUL character removed from its strings (keys too), and how many were removed.
    PostgreSQL's jsonb cannot hold U+0000."""
    if isinstance(value, str):
        count = value.count("\x00")
        return (value.replace("\x00", "") if count else value), count
    if isinstance(value, dict):
        out, total = {}, 0
        for key, inner in value.items():
            new_key, n1 = strip_nul(key)
            new_inner, n2 = strip_nul(inner)
            out[new_key] = new_inner
            total += n1 + n2
        return (out if total else value), total
    if isinstance(value, list):
        items, total = [], 0
        for inner in value:
            new_inner, n = strip_nul(inner)
            items.append(new_inner)
            total += n
        return (items if total else value), total
    return value, 0


@dataclass
class _Parsed:
    kind: str
    timestamp: str | None
    payload: Any
    ordinal: int | None
    repairs: list[str] = field(default_factory=list)


def json_error(exc: json.JSONDecodeError, raw: str) -> str:
    """Why a line is not JSON; a line cut in the middle (a session still writing, or one that crashed) says so."""
    cut = exc.msg.startswith("Unterminated string") or (
        exc.pos >= len(raw.rstrip("\r\n")) and exc.msg.startswith("Expecting"))
    reason = "invalid JSON, the line is cut short" if cut else "invalid JSON"
    return f"{reason} ({exc.msg} at column {exc.colno})"


def _parse_line(raw: str | bytes, *, strict: bool) -> _Parsed:
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Malformed(f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    if raw.startswith(UTF8_BOM):
        raise _Malformed(BOM_REASON)
    try:
        obj, nul = storable.loads(raw)
    except json.JSONDecodeError as exc:
        raise _Malformed(json_error(exc, raw)) from None
    except storable.Unstorable as exc:
        raise _Malformed(str(exc)) from None
    if not isinstance(obj, dict):
        raise _Malformed("a rollout line must be a JSON object")
    repairs: list[str] = []
    if nul:
        # PostgreSQL's jsonb cannot hold U+0000: refused when strict, removed (and reported) when tolerant.
        if strict:
            raise _Malformed(f"{nul} NUL character{'s' if nul > 1 else ''} (\\u0000), which no database here stores")
        obj, _ = strip_nul(obj)
        repairs.append(f"{nul} NUL character{'s' if nul > 1 else ''} removed from the text")
    kind = obj.get("type")
    if not isinstance(kind, str) or not kind:
        raise _Malformed("missing string `type`")
    if "payload" not in obj:
        if strict or kind in KNOWN_KINDS:
            raise _Malformed(f"{kind} line has no `payload`")
    timestamp = obj.get("timestamp")
    if not isinstance(timestamp, str):
        if strict:
            raise _Malformed("missing string `timestamp`")
        repairs.append("missing timestamp: the previous line's is used")
        timestamp = None
    elif not strict and not _is_iso_timestamp(timestamp):
        repairs.append(f"timestamp {timestamp[:40]!r} is not ISO-8601: the previous line's is used")
        timestamp = None
    ordinal = obj.get("ordinal")
    if ordinal is not None and not (_is_int(ordinal) and ordinal >= 0):
        if strict:
            raise _Malformed("`ordinal` must be a non-negative integer")
        ordinal = None
    payload = obj.get("payload")
    return _Parsed(kind, timestamp, _check_payload(kind, payload), ordinal, repairs)


UTF8_BOM = "\ufeff"
BOM_REASON = ("the file begins with a UTF-8 byte order mark (BOM), which Codex never writes; save it as UTF-8 "
              "without a BOM and import it again")


def missing_meta_reason(raw: Iterable[RawLine]) -> str:
    """Why a file yielded no session_meta line, said as plainly as the file allows (issue 30): an empty file, a
    file that starts with a byte order mark (Codex writes UTF-8 without one), or no session_meta first."""
    first = next((line for line in raw if line.text.strip()), None)
    if first is None:
        return "the file is empty: a Codex rollout begins with its session_meta line"
    if first.text.startswith(UTF8_BOM):
        return BOM_REASON
    return "the rollout has no session_meta line (Codex writes one first)"


def parse_rollout(lines: Iterable[str | bytes], *, source_name: str = "", strict: bool = True,
                  first_line_no: int = 1, last_timestamp: str | None = None) -> ParsedRollout:
    """Parse and validate a Codex rollout (spec §15, §1.5).

    Blank lines are ignored. Strict: refuse it whole if any line is malformed, raising RolloutImportError that
    lists every bad line (its message starts with the first one, `line 7: ...`); a final line cut in the middle
    of its JSON is malformed like any other. Tolerant (`strict=False`): skip or repair such lines and list them in
    `problems`; a rollout with no usable line at all still parses (the importer then refuses it for lack of a
    session_meta). A big file can be parsed in chunks: `first_line_no` numbers the chunk's lines and
    `last_timestamp` is the previous chunk's last one (for repairs).
    """
    kept: list[RolloutLine] = []
    errors: list[tuple[int, str]] = []
    problems: list[LineProblem] = []
    counts: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    session_meta: dict[str, Any] | None = None
    for line_no, raw in enumerate(lines, start=first_line_no):
        if not raw.strip():
            continue
        try:
            parsed = _parse_line(raw, strict=strict)
        except _Malformed as exc:
            if strict:
                errors.append((line_no, str(exc)))
            else:
                problems.append(LineProblem(line_no, str(exc), SKIPPED))
            continue
        kind = parsed.kind
        counts[kind] += 1
        if kind not in KNOWN_KINDS:
            skipped[kind] += 1
            continue
        timestamp = parsed.timestamp or last_timestamp
        if timestamp is None:
            timestamp = _first_timestamp(parsed.payload) or "1970-01-01T00:00:00.000Z"
        last_timestamp = timestamp
        problems.extend(LineProblem(line_no, reason, REPAIRED) for reason in parsed.repairs)
        payload = parsed.payload
        if kind == SESSION_META and session_meta is None:
            session_meta = payload
        kept.append(RolloutLine(line_no=line_no, timestamp=timestamp, kind=kind, payload=payload,
                                ordinal=parsed.ordinal))
    if errors:
        raise RolloutImportError(errors, source_name=source_name)
    return ParsedRollout(
        source_name=source_name,
        lines=kept,
        session_meta=session_meta,
        kind_counts=dict(counts),
        skipped_kinds=dict(skipped),
        problems=problems,
    )


def _first_timestamp(payload: Any) -> str | None:
    """A session_meta carries its own start time; used when the line's timestamp is unusable."""
    if isinstance(payload, dict) and _is_iso_timestamp(payload.get("timestamp")):
        return payload["timestamp"]
    return None


def line_too_long(line_no: int, *, max_line_bytes: int, source_name: str = "") -> RolloutImportError:
    """The refusal of a file one of whose lines is longer than the import's line limit (issue 27), on every path:
    the upload, the API, `import_rollouts` and the follower."""
    return RolloutImportError([(line_no, f"the line is longer than {max_line_bytes} bytes (the import's line limit, "
                                         "COMPACTWEB_MAX_IMPORT_LINE_BYTES)")], source_name=source_name)


def iter_lines(chunks: Iterable[bytes], *, max_line_bytes: int, source_name: str = "") -> Iterator[bytes]:
    """The lines of a file read a chunk at a time (each with its line break, as `splitlines(keepends=True)` gives
    them), as they complete: one line in memory at a time. Raises `line_too_long` as soon as one line grows past
    `max_line_bytes` (issue 27), before the rest of it is joined or any of it is parsed."""
    count = 0
    partial: list[bytes] = []
    partial_size = 0

    def split(line: bytes) -> tuple[bytes, ...] | list[bytes]:
        return line.splitlines(keepends=True) if b"\r" in line else (line,)

    for chunk in chunks:
        pieces = chunk.split(b"\n")
        for piece in pieces[:-1]:
            if partial_size + len(piece) > max_line_bytes:
                raise line_too_long(count + 1, max_line_bytes=max_line_bytes, source_name=source_name)
            for line in split(b"".join((*partial, piece, b"\n")) if partial else piece + b"\n"):
                count += 1
                yield line
            partial, partial_size = [], 0
        if pieces[-1]:
            partial.append(pieces[-1])
            partial_size += len(pieces[-1])
            if partial_size > max_line_bytes:
                raise line_too_long(count + 1, max_line_bytes=max_line_bytes, source_name=source_name)
    if partial:
        yield from split(b"".join(partial))


def read_lines(chunks: Iterable[bytes], *, max_line_bytes: int, source_name: str = "") -> list[bytes]:
    """`iter_lines` as a list: the whole file read (and refused on a long line) before anything is parsed."""
    return list(iter_lines(chunks, max_line_bytes=max_line_bytes, source_name=source_name))


def file_chunks(handle: BinaryIO, size: int = 1 << 16) -> Iterator[bytes]:
    """A binary file read `size` bytes at a time (for `iter_lines`: no line is read whole before it is measured)."""
    while chunk := handle.read(size):
        yield chunk


@dataclass(frozen=True)
class RawLine:
    """One line of a rollout file as read: `raw` without its newline (bytes or text, as given), `text` the same
    as text (undecodable bytes replaced), `terminated` False only for a last line that had no newline."""

    raw: str | bytes
    text: str
    terminated: bool


def split_raw_lines(lines: Iterable[str | bytes]) -> list[RawLine]:
    """The lines of a file (each with or without its newline, e.g. a file object or `splitlines(keepends=True)`)
    as RawLines, so that joining `text + "\\n"` (for terminated lines) gives the file back."""
    out: list[RawLine] = []
    for line in lines:
        if isinstance(line, bytes):
            terminated = line.endswith(b"\n")
            raw: str | bytes = line[:-1] if terminated else line
            text = raw.decode("utf-8", errors="replace")
        else:
            terminated = line.endswith("\n")
            raw = line[:-1] if terminated else line
            text = raw
        out.append(RawLine(raw=raw, text=text.replace("\x00", "\ufffd"), terminated=terminated))
    return out
