"""The simulated model over the Anthropic Messages API (issue 35): `/anthropic/v1/messages` and
`/anthropic/v1/messages/count_tokens` of the simulator, enough for the real Claude Code CLI.

The simulator thinks in Responses items, so a Messages request is read as items (text blocks → messages, `tool_use`
→ `function_call`, `tool_result` → `function_call_output`; `system` → instructions; tools with an `input_schema`
→ function tools), answered by the same deterministic replies as every other endpoint, and the output is written
back as content blocks (`function_call` → `tool_use` with its input object). A streamed answer follows Anthropic's
event sequence: `message_start`, per block `content_block_start` / `content_block_delta` (`text_delta` or
`input_json_delta`) / `content_block_stop`, then `message_delta` (stop reason, output tokens) and `message_stop`.

Claude Code compacts by asking the model for a summary in a normal request (its tools still offered) whose last
user message says "Your task is to create a detailed summary of the conversation so far"; the simulator answers it with its extractive
summary, and Claude Code writes that summary into its transcript after a compact boundary.
Nothing here does I/O: `app.SimulatedProvider` calls it.
"""

from __future__ import annotations

import json
from typing import Any

from compaction_app.engine.items import is_message, message_text
from compaction_app.providers.anthropic_format import MessagesFormatError, content_items

# Context Claude Code adds to user messages on its own (environment, dates, tool lists): not the user's words, so
# the simulated model does not read it (it would take it for the user's request).
REMINDER = "<system-reminder>"
# What Claude Code's compaction prompt says (its own wording, checked against the pinned CLI).
SUMMARY_PROMPT_MARKERS = ("your task is to create a detailed summary of",)


def _text_of_system(system: Any) -> str:
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n\n".join(b.get("text", "") for b in system if isinstance(b, dict) and b.get("type") == "text")
    raise MessagesFormatError("`system` must be a string or an array of text blocks")


def _not_reminder(text: str) -> bool:
    return not text.lstrip().startswith(REMINDER)


def _without_reminders(text: str) -> str:
    return text.split("\n\n" + REMINDER)[0]


def messages_to_items(messages: Any) -> list[dict[str, Any]]:
    """Anthropic `messages` → Responses items, in order (compaction_app.providers.anthropic_format), without the
    `<system-reminder>` context Claude Code adds."""
    if not isinstance(messages, list):
        raise MessagesFormatError("`messages` must be an array")
    items: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise MessagesFormatError(f"messages[{index}] must be an object with role user or assistant")
        try:
            items += content_items(message["role"], message.get("content"), keep_text=_not_reminder,
                                   output_of=_without_reminders)
        except MessagesFormatError as exc:
            raise MessagesFormatError(f"messages[{index}]: {exc}") from None
    return items


def tools_as_functions(tools: Any) -> list[dict[str, Any]]:
    """Anthropic tools (`name`, `input_schema`) → Responses function tools; server tools (a `type` such as
    `web_search_20250305`) are not offered to the simulated model."""
    out = []
    for tool in tools or []:
        if isinstance(tool, dict) and isinstance(tool.get("name"), str) and tool.get("type") in (None, "custom"):
            out.append({"type": "function", "name": tool["name"], "description": tool.get("description", ""),
                        "parameters": tool.get("input_schema") or {}})
    return out


def read_request(body: dict[str, Any]) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """(instructions, items, tools) of a Messages request."""
    return _text_of_system(body.get("system")), messages_to_items(body.get("messages")), \
        tools_as_functions(body.get("tools"))


def is_summary_request(items: list[dict[str, Any]]) -> bool:
    """Whether the newest user message is Claude Code's compaction prompt."""
    last_user = next((i for i in reversed(items) if is_message(i, "user")), None)
    if last_user is None:
        return False
    text = message_text(last_user).lower()
    return any(marker in text for marker in SUMMARY_PROMPT_MARKERS)


def tool_use_id(call_id: str) -> str:
    return call_id if call_id.startswith("toolu_") else f"toolu_{call_id.removeprefix('call_')}"


def content_blocks(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Responses output items → Anthropic content blocks (reasoning is not shown: no thinking was asked for)."""
    blocks: list[dict[str, Any]] = []
    for item in output:
        if item.get("type") == "message":
            text = "".join(p.get("text", "") for p in item.get("content", []) if isinstance(p, dict))
            blocks.append({"type": "text", "text": text})
        elif item.get("type") == "function_call":
            try:
                arguments = json.loads(item.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            blocks.append({"type": "tool_use", "id": tool_use_id(str(item.get("call_id", ""))),
                           "name": item.get("name", ""), "input": arguments})
    return blocks


def stop_reason(blocks: list[dict[str, Any]]) -> str:
    return "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"


def usage(input_tokens: int, output_tokens: int, cached: int) -> dict[str, int]:
    """Anthropic's usage: `input_tokens` excludes what was read from the prompt cache."""
    return {"input_tokens": input_tokens - cached, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cached, "output_tokens": output_tokens}


def message(message_id: str, model: str, blocks: list[dict[str, Any]], usage_: dict[str, int]) -> dict[str, Any]:
    return {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": blocks,
            "stop_reason": stop_reason(blocks), "stop_sequence": None, "usage": usage_}


def _event(kind: str, payload: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n".encode()


def stream_events(answer: dict[str, Any], pieces) -> list[bytes]:
    """The SSE events of a streamed answer, in Anthropic's order; `pieces` splits text into deltas."""
    usage_ = answer["usage"]
    start = {**answer, "content": [], "stop_reason": None, "usage": {**usage_, "output_tokens": 1}}
    events = [_event("message_start", {"message": start}), _event("ping", {})]
    for index, block in enumerate(answer["content"]):
        if block["type"] == "text":
            events.append(_event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}))
            for piece in pieces(block["text"]):
                events.append(_event("content_block_delta",
                                     {"index": index, "delta": {"type": "text_delta", "text": piece}}))
        else:
            events.append(_event("content_block_start", {"index": index, "content_block": {**block, "input": {}}}))
            events.append(_event("content_block_delta", {"index": index, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(block["input"])}}))
        events.append(_event("content_block_stop", {"index": index}))
    events.append(_event("message_delta", {"delta": {"stop_reason": answer["stop_reason"], "stop_sequence": None},
                                           "usage": {"output_tokens": usage_["output_tokens"]}}))
    events.append(_event("message_stop", {}))
    return events


def error_body(error_type: str, message_: str) -> dict[str, Any]:
    """Anthropic's error shape."""
    return {"type": "error", "error": {"type": error_type, "message": message_}}
