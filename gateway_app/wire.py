"""What the gateway reads from and writes to the wire (issue 29; spec §13, §16). Plain Python, no Django.

Codex 0.169 sends, with every `POST /responses`, its turn metadata as the `x-codex-turn-metadata` header (JSON) and
again inside the body's `client_metadata` (spec §16): session and thread ids, the turn, the window and the request
kind (`turn` or `compaction`). A remote v2 compaction is a `/responses` request whose last input item is
`{"type": "compaction_trigger"}` (§4.3); v1 is `POST /responses/compact` (§4.2); a custom provider compacts
locally with an ordinary `/responses` request whose last item is the summarization prompt (§4.1).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

TURN_METADATA_HEADER = "x-codex-turn-metadata"
TRIGGER = "compaction_trigger"
HANDLE_PREFIX = "cwgh_"

TURN = "turn"
COMPACTION_V2 = "compaction_v2"
COMPACTION_V1 = "compaction_v1"
COMPACTION_LOCAL = "compaction_local"
COMPACTION_KINDS = (COMPACTION_V2, COMPACTION_V1, COMPACTION_LOCAL)

# Fields an item carries on the wire that say nothing about its content: a client may send an item back without
# them (ids, stream status, Codex's own metadata), so histories are compared without them and without null fields
# (Codex sends a reasoning item back with `"content": null`).
WIRE_ONLY_FIELDS = frozenset({"id", "status", "internal_chat_message_metadata_passthrough"})
# At most this many leading history items name a session that sends no metadata and no prompt_cache_key.
PREFIX_ITEMS = 20


class BadRequest(ValueError):
    """A body the gateway refuses with 400 (the API's error shape)."""


def _as_json_object(text: Any) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    if not isinstance(text, str):
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def turn_metadata(headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    """The turn metadata Codex sent (header first, then the body's copy), or {} when there is none."""
    meta = _as_json_object(headers.get(TURN_METADATA_HEADER))
    client = body.get("client_metadata")
    if not meta and isinstance(client, dict):
        meta = _as_json_object(client.get(TURN_METADATA_HEADER))
        if not meta:
            meta = {k: v for k, v in client.items() if k in ("session_id", "thread_id", "turn_id")}
    return meta


# Codex's built-in openai provider sends the CLI's version as a `version` header (it is that provider's own
# `http_headers` in codex-rs model_provider_info); a custom [model_providers.x] sends only the headers its config
# lists. The remote_compaction_v2 beta header does not tell them apart: 0.169 sends it with both (spec §16).
VERSION_HEADER = "version"
# Codex's originator header -> the `source` its session_meta names (codex-rs SessionSource: cli, vscode, exec).
SESSION_SOURCES = {"codex_exec": "exec", "codex_cli_rs": "cli", "codex_vscode": "vscode"}
_USER_AGENT_VERSION = re.compile(r"^[\w.-]+/(\d+\.\d+[\w.+-]*)")
_CWD = re.compile(r"<cwd>(.*?)</cwd>", re.S)


def client_provider(headers: dict[str, str]) -> str:
    """"openai" when the request comes from Codex's built-in openai provider (the `version` header), else ""
    (a custom provider: its id in the client's config.toml is not on the wire; recording uses the route's name)."""
    return "openai" if headers.get(VERSION_HEADER, "").strip() else ""


def client_version(headers: dict[str, str]) -> str:
    """The client's version: the openai provider's `version` header, else the user agent's
    (`codex_exec/0.169.0 (...)`), else ""."""
    version = headers.get(VERSION_HEADER, "").strip()
    if version:
        return version[:64]
    found = _USER_AGENT_VERSION.match(headers.get("user-agent", "").strip())
    return found.group(1)[:64] if found else ""


def client_source(headers: dict[str, str]) -> str:
    """The `source` Codex writes in its session_meta (exec, cli, vscode), from its originator; "" when unknown."""
    return SESSION_SOURCES.get(headers.get("originator", "").strip(), "")


def client_cwd(history: list[dict[str, Any]]) -> str:
    """The working folder of the request's environment context (`<environment_context><cwd>...`), Codex's
    session_meta `cwd`; "" when the history carries none."""
    for item in history[:PREFIX_ITEMS]:
        if item.get("type") == "message" and item.get("role") == "user":
            text = _text_of(item)
            if text.lstrip().startswith("<environment_context>"):
                found = _CWD.search(text)
                if found:
                    return found.group(1).strip()
    return ""


def parse_body(raw: bytes) -> dict[str, Any]:
    """The JSON request body, with `input` as a list of item objects; BadRequest otherwise."""
    try:
        body = json.loads(raw or b"null")
    except (ValueError, RecursionError):  # a UnicodeDecodeError too: bytes that are not UTF-8
        raise BadRequest("the request body is not valid JSON in UTF-8") from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    value = body.get("input")
    if isinstance(value, str):
        body["input"] = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": value}]}]
    elif not isinstance(value, list) or not all(isinstance(i, dict) for i in value):
        raise BadRequest("`input` must be a string or an array of item objects")
    if "instructions" in body and body["instructions"] is not None and not isinstance(body["instructions"], str):
        raise BadRequest("`instructions` must be a string")
    return body


def request_kind(*, endpoint: str, body: dict[str, Any], meta: dict[str, Any]) -> str:
    if endpoint == "responses/compact":
        return COMPACTION_V1
    items = body.get("input") or []
    if items and items[-1].get("type") == TRIGGER:
        return COMPACTION_V2
    if meta.get("request_kind") == "compaction":
        return COMPACTION_LOCAL
    return TURN


def _text_of(item: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in item.get("content") or [] if isinstance(p, dict))


def split_base(body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """(base instructions, history) of a request: Codex 0.169 sends its base instructions as the first
    `developer` input item and no `instructions` key (§16); other clients send `instructions`."""
    items = list(body.get("input") or [])
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        return body["instructions"], items
    if items and items[0].get("type") == "message" and items[0].get("role") == "developer":
        return _text_of(items[0]), items[1:]
    return "", items


def history_of(body: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """The conversation a request carries: without the base instructions, and for a compaction request without
    its trigger (v2) or summarization prompt (local)."""
    _, items = split_base(body)
    if kind in (COMPACTION_V2, COMPACTION_LOCAL) and items:
        return items[:-1]
    return items


def wire_form(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in WIRE_ONLY_FIELDS and v is not None}


def fingerprint(item: dict[str, Any]) -> str:
    return json.dumps(wire_form(item), sort_keys=True, ensure_ascii=False)


def common_prefix(live: list[dict[str, Any]], history: list[dict[str, Any]]) -> int:
    """How many leading items of `history` are `live`'s (compared without wire-only fields)."""
    n = 0
    for a, b in zip(live, history, strict=False):
        if a is not b and a != b and wire_form(a) != wire_form(b):
            break
        n += 1
    return n


def group_key(*, meta: dict[str, Any], body: dict[str, Any]) -> str:
    """The key that groups a Codex session's requests: its thread (or session) id from the turn metadata, else
    the prompt cache key (Codex sets it to the thread id), else empty (the recorder then matches by history)."""
    thread = meta.get("thread_id") or meta.get("session_id")
    if isinstance(thread, str) and thread:
        return f"thread:{thread[:200]}"
    cache = body.get("prompt_cache_key")
    if isinstance(cache, str) and cache:
        return f"cache:{cache[:200]}"
    return ""


PREFIX_GROUP = "prefix:"  # the group of a session that sends no metadata: its history prefix's digest


def prefix_group(history: list[dict[str, Any]]) -> str:
    return PREFIX_GROUP + prefix_digest(history)


def _opens_conversation(item: dict[str, Any]) -> bool:
    """The user's first own message (not injected context such as `<environment_context>`)."""
    return item.get("role") == "user" and not _text_of(item).lstrip().startswith("<")


def prefix_digest(history: list[dict[str, Any]]) -> str:
    """A digest of the history up to the user's first message: every request of one session starts with it."""
    head_items = history[:PREFIX_ITEMS]
    end = next((n + 1 for n, i in enumerate(head_items) if _opens_conversation(i)), len(head_items))
    head = "\n".join(fingerprint(i) for i in head_items[:end])
    return hashlib.sha256(head.encode("utf-8")).hexdigest()


def new_handle() -> str:
    return HANDLE_PREFIX + secrets.token_urlsafe(24)


def handles_in(items: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """(position, handle) of every compaction item whose encrypted content is a gateway handle."""
    return [(n, i["encrypted_content"]) for n, i in enumerate(items)
            if i.get("type") == "compaction" and isinstance(i.get("encrypted_content"), str)
            and i["encrypted_content"].startswith(HANDLE_PREFIX)]


def expand(items: list[dict[str, Any]], position: int, replacement: list[dict[str, Any]],
           context: Callable[[dict[str, Any]], bool] = lambda item: False) -> list[dict[str, Any]]:
    """The input with everything before the newest handle (except the base instructions) replaced by the stored
    replacement: what Codex kept before the compaction item is inside the replacement already, except the
    `context` items Codex put back there (its own context, spec §5.3) that the replacement does not hold (a summary
    keeps only the user's messages): those follow the replacement, so the upstream still sees them."""
    base = [items[0]] if items and items[0].get("type") == "message" and items[0].get("role") == "developer" else []
    present = {fingerprint(i) for i in replacement}
    kept = [i for i in items[len(base):position] if context(i) and fingerprint(i) not in present]
    return [*base, *replacement, *kept, *items[position + 1:]]


@dataclass
class StreamSummary:
    """What a streamed (or JSON) Responses answer said: its output items, usage and id."""

    response_id: str = ""
    output: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    completed: bool = False
    error: str = ""


# The events whose content the recorder keeps (a cheap byte test before any JSON is parsed; an event that only
# mentions one of these names is parsed and then ignored by its type).
_KEPT_EVENTS = (b"response.output_item.done", b"response.completed", b"response.done", b"response.failed",
                b"error")


class SseReader:
    """Reads a Responses SSE stream (fed in chunks or whole) and keeps what the recorder needs."""

    def __init__(self) -> None:
        self._buffer = b""
        self.summary = StreamSummary()
        self._done_items: list[dict[str, Any]] = []

    def feed(self, chunk: bytes) -> None:
        buffer = self._buffer + chunk if self._buffer else chunk
        start = 0
        while (end := buffer.find(b"\n\n", start)) >= 0:  # by offset: a whole answer fed at once is read once
            self._event(buffer[start:end])
            start = end + 2
        self._buffer = buffer[start:]

    def _event(self, raw: bytes) -> None:
        if not any(kind in raw for kind in _KEPT_EVENTS):
            return  # a text delta or another event the record does not need: not worth parsing its JSON
        data = b"".join(line[5:].lstrip() for line in raw.replace(b"\r\n", b"\n").split(b"\n")
                        if line.startswith(b"data:"))
        if not data:
            return
        try:
            payload = json.loads(data)
        except ValueError:
            return
        if not isinstance(payload, dict):
            return
        kind = payload.get("type")
        if kind == "response.output_item.done" and isinstance(payload.get("item"), dict):
            self._done_items.append(payload["item"])
        elif kind in ("response.completed", "response.done") and isinstance(payload.get("response"), dict):
            response = payload["response"]
            self.summary.completed = True
            self.summary.response_id = str(response.get("id") or "")
            self.summary.usage = response.get("usage") if isinstance(response.get("usage"), dict) else None
        elif kind in ("response.failed", "error"):
            self.summary.error = json.dumps(payload)[:2000]

    def finish(self) -> StreamSummary:
        self.summary.output = list(self._done_items)
        return self.summary


def summary_of_json(payload: Any) -> StreamSummary:
    if not isinstance(payload, dict):
        return StreamSummary()
    output = payload.get("output")
    return StreamSummary(response_id=str(payload.get("id") or ""),
                         output=[i for i in output if isinstance(i, dict)] if isinstance(output, list) else [],
                         usage=payload.get("usage") if isinstance(payload.get("usage"), dict) else None,
                         completed=isinstance(output, list))


def sse_response(*, model: str, output: list[dict[str, Any]], usage: dict[str, Any]) -> tuple[str, bytes]:
    """(response id, a complete SSE stream) answering with `output`: what Codex reads from a Responses stream."""
    response_id = "resp_" + secrets.token_hex(12)
    created = int(time.time())

    def response(status: str, out: list[dict[str, Any]], use: dict[str, Any] | None) -> dict[str, Any]:
        return {"id": response_id, "object": "response", "created_at": created, "status": status, "model": model,
                "output": out, "usage": use, "error": None, "incomplete_details": None}

    events = [("response.created", {"response": response("in_progress", [], None)})]
    for index, item in enumerate(output):
        events.append(("response.output_item.added", {"output_index": index, "item": item}))
        events.append(("response.output_item.done", {"output_index": index, "item": item}))
    events.append(("response.completed", {"response": response("completed", output, usage)}))
    chunks = [f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': n, **fields})}\n\n"
              for n, (kind, fields) in enumerate(events)]
    return response_id, "".join(chunks).encode("utf-8")


def failed_event(message: str) -> bytes:
    """A `response.failed` SSE event: how the gateway ends a stream the upstream cut (Codex reports the message
    and retries, as for an upstream's own failure)."""
    payload = {"type": "response.failed", "response": {
        "id": f"resp_gateway_{secrets.token_hex(8)}", "object": "response", "created_at": int(time.time()),
        "status": "failed", "output": [], "error": {"code": "server_error", "message": f"compactweb gateway: {message}"}}}
    return b"event: response.failed\ndata: " + json.dumps(payload).encode() + b"\n\n"
