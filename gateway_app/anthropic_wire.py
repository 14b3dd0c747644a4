"""What the Anthropic Messages gateway reads from and writes to the wire (issue 44). Plain Python, no Django.

Claude Code sends `POST {ANTHROPIC_BASE_URL}/v1/messages` with the whole conversation every time: `system`
(text or text blocks), `messages` (user and assistant turns of content blocks), `tools`, and `metadata.user_id`, a
JSON string whose `session_id` is its session's (the transcript's name). The gateway records each exchange as the
Claude Code transcript reader does (`compaction_app.providers.anthropic_format`, one vocabulary for both): text →
`message` items, `tool_use` → `function_call`, `tool_result` → `function_call_output`; thinking blocks have no
item (Claude Code does not send an ended turn's thinking back). Claude Code compacts with an ordinary request
whose last user message is its summary prompt ("Your task is to create a detailed summary of the conversation so
far ..."): a local summarisation (`wire.COMPACTION_LOCAL`).

An answer is a JSON `message`, or an SSE stream: `message_start` (id, usage), per block `content_block_start` /
`content_block_delta` (`text_delta`, `input_json_delta`, `thinking_delta`, ...) / `content_block_stop`,
`message_delta` (stop reason, output tokens), `message_stop`; or an `error` event.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from compaction_app.engine.items import is_message, message_text
from compaction_app.engine.pins import PINNED_OPEN, is_pinned_block
from compaction_app.providers.anthropic_format import (
    MessagesFormatError,
    content_items,
    result_text,
    text_block,
    tool_input,
    usage_as_responses,
)
from compaction_app.providers.simulated.anthropic import is_summary_request
from gateway_app import wire

BadRequest = wire.BadRequest
MESSAGES = "anthropic/messages"
COUNT_TOKENS = "anthropic/count_tokens"
# The gateway's Anthropic endpoints (under /gateway, or /gateway/r/<route>): path -> endpoint. The upstream gets
# the same path under its Provider's base URL (Claude Code's ANTHROPIC_BASE_URL form: no /v1 in it).
ENDPOINTS = {"/anthropic/v1/messages": MESSAGES, "/anthropic/v1/messages/count_tokens": COUNT_TOKENS}
UPSTREAM_PATHS = {MESSAGES: "v1/messages", COUNT_TOKENS: "v1/messages/count_tokens"}
# Anthropic's error types by status (https://docs.anthropic.com/en/api/errors).
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 405: "invalid_request_error", 413: "request_too_large",
               429: "rate_limit_error", 500: "api_error", 502: "api_error", 529: "overloaded_error"}
SSE = "anthropic_sse"
JSON = "anthropic_json"
# The events that end a Messages stream, matched on the raw bytes (a quote inside a JSON string is escaped).
STREAM_END = re.compile(rb'"type":\s*"(?:message_stop|error)"')


def error_body(status: int, message: str) -> bytes:
    """Anthropic's error shape, which Claude Code reads and shows."""
    return json.dumps({"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"),
                                                  "message": message}}).encode()


def error_event(message: str) -> bytes:
    """An `error` SSE event: how the gateway ends a stream the upstream cut (Claude Code reports it and retries)."""
    payload = {"type": "error", "error": {"type": "api_error", "message": f"compactweb gateway: {message}"}}
    return b"event: error\ndata: " + json.dumps(payload).encode() + b"\n\n"


def parse_body(raw: bytes) -> dict[str, Any]:
    """The JSON request body with `messages` an array of user/assistant turns; BadRequest otherwise."""
    try:
        body = json.loads(raw or b"null")
    except (ValueError, RecursionError):
        raise BadRequest("the request body is not valid JSON in UTF-8") from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise BadRequest("`messages` must be an array")
    for n, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise BadRequest(f"messages[{n}] must be an object with role user or assistant")
    system = body.get("system")
    if system is not None and not isinstance(system, str | list):
        raise BadRequest("`system` must be a string or an array of text blocks")
    return body


def base_instructions(body: dict[str, Any]) -> str:
    system = body.get("system")
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _message_items(n: int, message: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        items = content_items(message["role"], message.get("content"))
    except MessagesFormatError as exc:
        raise BadRequest(f"messages[{n}]: {exc}") from None
    return [_as_pinned_block(i) for i in items]


def _as_pinned_block(item: dict[str, Any]) -> dict[str, Any]:
    """The user message the gateway put in for the operator's pins (`with_pins`) is the session's pinned block,
    a developer message (Messages has no developer role): read back, it is that block again."""
    parts = item.get("content") if item.get("type") == "message" and item.get("role") == "user" else None
    if isinstance(parts, list) and len(parts) == 1 and str(parts[0].get("text", "")).startswith(PINNED_OPEN):
        return {**item, "role": "developer"}
    return item


def items_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation as items, as the transcript reader maps it (every text kept: the record is what the
    upstream received)."""
    return [i for n, message in enumerate(body["messages"]) for i in _message_items(n, message)]


def with_pins(body: dict[str, Any], steered: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The request's messages with the pinned blocks `steered` (gateway_app.steering's view of its items) has in
    addition put in, each as a user message of its own where it stands; None when `steered` differs from the
    request's items otherwise (then the request goes on as Claude Code sent it)."""
    out: list[dict[str, Any]] = []
    at = 0

    def blocks_here() -> None:
        nonlocal at
        while at < len(steered) and is_pinned_block(steered[at]):
            out.append({"role": "user", "content": [{"type": "text", "text": message_text(steered[at])}]})
            at += 1

    for n, message in enumerate(body["messages"]):
        own = _message_items(n, message)
        if not (own and is_pinned_block(own[0])):
            blocks_here()
        if [wire.wire_form(i) for i in steered[at:at + len(own)]] != [wire.wire_form(i) for i in own]:
            return None
        at += len(own)
        out.append(message)
    blocks_here()
    return out if at == len(steered) else None


def messages_of(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items as Messages `messages` that read back (`items_of`) as the same items: what the gateway sends for a
    history Claude Code did not send (a substitution's replacement, a compaction run at this request). Each
    message item is a message of its own (two in one would read back as one item with both parts), a developer
    message is the user's text (a pinned block stays alone, and reads back as the block); a tool call joins the
    assistant message before it, a tool result the user message of tool results before it (as Claude Code sends
    them). Items with no Messages form (reasoning, compaction) are left out."""
    out: list[dict[str, Any]] = []

    def add(role: str, block: dict[str, Any], *, join: bool) -> None:
        if join and out and out[-1]["role"] == role:
            out[-1]["content"].append(block)
        else:
            out.append({"role": role, "content": [block]})

    for item in items:
        kind = item.get("type")
        if kind == "message":
            content = item.get("content")
            parts = [{"type": "input_text", "text": content}] if isinstance(content, str) else content or []
            blocks = [b for b in (text_block(p) for p in parts if isinstance(p, dict)) if b is not None]
            if blocks:
                out.append({"role": "assistant" if item.get("role") == "assistant" else "user", "content": blocks})
        elif kind == "function_call":
            add("assistant", {"type": "tool_use", "id": str(item.get("call_id", "")),
                              "name": str(item.get("name", "")), "input": tool_input(item.get("arguments"))},
                join=True)
        elif kind == "function_call_output":
            output = item.get("output")
            block = {"type": "tool_result", "tool_use_id": str(item.get("call_id", "")),
                     "content": output if isinstance(output, str) else result_text(output)}
            add("user", block, join=bool(out) and out[-1]["content"][-1].get("type") == "tool_result")
    return out


def steered_messages(body: dict[str, Any], steered: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The request's messages for `steered` (gateway_app.steering's view of its items, or a compacted history):
    when only pinned blocks were put in, Claude Code's messages as sent with those blocks (`with_pins`); else the
    longest run of Claude Code's last messages whose items end `steered` kept as sent (their cache marks and
    thinking blocks with them), and what comes before written from the items (`messages_of`)."""
    pinned = with_pins(body, steered)
    if pinned is not None:
        return pinned
    messages = body["messages"]
    kept, tail = 0, 0
    for n in range(len(messages) - 1, -1, -1):
        own = [wire.wire_form(i) for i in _message_items(n, messages[n])]
        end = len(steered) - tail
        if len(own) > end or [wire.wire_form(i) for i in steered[end - len(own):end]] != own:
            break
        kept, tail = kept + 1, tail + len(own)
    return [*messages_of(steered[:len(steered) - tail]), *messages[len(messages) - kept:]]


def claude_session(body: dict[str, Any], headers: dict[str, str]) -> str:
    """Claude Code's session id: `metadata.user_id` is a JSON object with `session_id` (2.x), or an older
    `user_<hash>_account_<uuid>_session_<uuid>` string; else its `x-claude-code-session-id` header; "" if none."""
    user_id = (body.get("metadata") or {}).get("user_id") if isinstance(body.get("metadata"), dict) else None
    if isinstance(user_id, str) and user_id:
        try:
            value = json.loads(user_id)
        except ValueError:
            value = None
        if isinstance(value, dict) and isinstance(value.get("session_id"), str):
            return value["session_id"][:200]
        found = re.search(r"_session_([0-9a-fA-F-]{36})", user_id)
        if found:
            return found.group(1)
    return headers.get("x-claude-code-session-id", "")[:200]


def turn_metadata(session_id: str) -> dict[str, Any]:
    """What the recorder reads of a request's metadata: the session id, as Codex's turn metadata names it (the
    compactweb session then keeps Claude Code's session id as its thread id)."""
    try:
        uuid.UUID(session_id)
    except ValueError:
        return {"client": "claude_code", "claude_session": session_id} if session_id else {"client": "claude_code"}
    return {"client": "claude_code", "session_id": session_id}


def group_key(session_id: str) -> str:
    """Claude Code's session id names its session; without one the recorder matches by history (wire.group_key)."""
    return f"claude:{session_id}" if session_id else ""


def request_kind(items: list[dict[str, Any]]) -> str:
    return wire.COMPACTION_LOCAL if is_summary_request(items) else wire.TURN


def history_of(items: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The conversation a request carries; for a summary request without the message holding its prompt."""
    if kind == wire.COMPACTION_LOCAL and items and is_message(items[-1], "user"):
        return items[:-1]
    return items


def summary_text(output: list[dict[str, Any]]) -> str:
    return "".join(message_text(i) for i in output if is_message(i, "assistant"))


class SseReader:
    """Reads a Messages SSE stream (fed in chunks or whole) into a wire.StreamSummary: the answer's blocks as
    items, its usage in the Responses shape, its id; `completed` at `message_stop`."""

    def __init__(self) -> None:
        self._buffer = b""
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, str] = {}
        self._usage: dict[str, Any] = {}
        self.summary = wire.StreamSummary()

    def feed(self, chunk: bytes) -> None:
        buffer = self._buffer + chunk if self._buffer else chunk
        buffer = buffer.replace(b"\r\n", b"\n")
        start = 0
        while (end := buffer.find(b"\n\n", start)) >= 0:
            self._event(buffer[start:end])
            start = end + 2
        self._buffer = buffer[start:]

    def _event(self, raw: bytes) -> None:
        data = b"".join(line[5:].lstrip() for line in raw.split(b"\n") if line.startswith(b"data:"))
        try:
            payload = json.loads(data) if data else None
        except ValueError:
            return
        if not isinstance(payload, dict):
            return
        kind = payload.get("type")
        if kind == "message_start" and isinstance(payload.get("message"), dict):
            message = payload["message"]
            self.summary.response_id = str(message.get("id") or "")
            if isinstance(message.get("usage"), dict):
                self._usage.update(message["usage"])
        elif kind == "content_block_start" and isinstance(payload.get("content_block"), dict):
            index = int(payload.get("index") or 0)
            self._blocks[index] = dict(payload["content_block"])
        elif kind == "content_block_delta" and isinstance(payload.get("delta"), dict):
            self._delta(int(payload.get("index") or 0), payload["delta"])
        elif kind == "message_delta" and isinstance(payload.get("usage"), dict):
            self._usage.update({k: v for k, v in payload["usage"].items() if v is not None})
        elif kind == "message_stop":
            self.summary.completed = True
        elif kind == "error":
            self.summary.error = json.dumps(payload)[:2000]

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self._blocks.setdefault(index, {"type": "text", "text": ""})
        if delta.get("type") == "text_delta":
            block["text"] = str(block.get("text") or "") + str(delta.get("text") or "")
        elif delta.get("type") == "input_json_delta":
            self._json[index] = self._json.get(index, "") + str(delta.get("partial_json") or "")

    def finish(self) -> wire.StreamSummary:
        blocks = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if index in self._json:
                try:
                    block = {**block, "input": json.loads(self._json[index] or "{}")}
                except ValueError:
                    block = {**block, "input": {}}
            blocks.append(block)
        try:
            self.summary.output = content_items("assistant", blocks)
        except MessagesFormatError:
            self.summary.output = []
        self.summary.usage = usage_as_responses(self._usage) if self._usage else None
        return self.summary


def summary_of_json(payload: Any) -> wire.StreamSummary:
    if not isinstance(payload, dict) or not isinstance(payload.get("content"), list):
        return wire.StreamSummary()
    try:
        output = content_items("assistant", payload["content"])
    except MessagesFormatError:
        output = []
    return wire.StreamSummary(response_id=str(payload.get("id") or ""), output=output,
                              usage=usage_as_responses(payload.get("usage")), completed=True)


def read_answer(answer_format: str, raw: bytes) -> tuple[wire.StreamSummary, str]:
    """(what the answer said, the error of one that did not end or is not JSON)."""
    if answer_format == SSE:
        reader = SseReader()
        reader.feed(raw)
        summary = reader.finish()
        return summary, "" if summary.completed else (summary.error or "the stream closed before message_stop")
    try:
        return summary_of_json(json.loads(raw)), ""
    except ValueError:
        return wire.StreamSummary(), "the upstream's answer is not JSON"
