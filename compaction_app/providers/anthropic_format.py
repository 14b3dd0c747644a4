"""Anthropic Messages content as Responses items (issue 35), one vocabulary for the two readers of it: the
simulated model's Messages endpoint (compaction_app.providers.simulated.anthropic) and the Claude Code transcript
reader (sessions_app.claude_transcript), whose entries hold the same `message` objects.

A message's content is a string or blocks: `text` → a `message` part (`input_text` for the user, `output_text`
for the assistant), `image` (user) → an `input_image` part, `tool_use` → a `function_call` (its `input` object as
JSON `arguments`), `tool_result` → a `function_call_output` (its text). Thinking blocks and anything else have no
Responses item here. Consecutive text parts make one message; a tool block ends it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Item = dict[str, Any]


class MessagesFormatError(ValueError):
    """Content that is not a string or a list of block objects."""


def _keep(text: str) -> bool:
    return True


def _same(text: str) -> str:
    return text


def result_text(content: Any) -> str:
    """A tool_result's content as text (a string, or its text blocks joined by newlines)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return "" if content is None else json.dumps(content)


def _image_part(block: dict[str, Any]) -> dict[str, Any] | None:
    source = block.get("source") if isinstance(block.get("source"), dict) else {}
    if source.get("type") == "base64":
        return {"type": "input_image", "image_url": f"data:{source.get('media_type', 'image/png')};base64,"
                                                    f"{source.get('data', '')}"}
    if isinstance(source.get("url"), str):
        return {"type": "input_image", "image_url": source["url"]}
    return None


def content_items(role: str, content: Any, *, keep_text: Callable[[str], bool] = _keep,
                  output_of: Callable[[str], str] = _same) -> list[Item]:
    """The Responses items of one message's content. `keep_text` may leave text blocks out and `output_of` may
    trim a tool result's text (the simulated model drops the context Claude Code injects)."""
    part_type = "output_text" if role == "assistant" else "input_text"
    if isinstance(content, str):
        return [{"type": "message", "role": role, "content": [{"type": part_type, "text": content}]}] if content else []
    if not isinstance(content, list):
        raise MessagesFormatError("content must be a string or an array of blocks")
    items: list[Item] = []
    parts: list[dict[str, Any]] = []

    def flush() -> None:
        if parts:
            items.append({"type": "message", "role": role, "content": list(parts)})
            parts.clear()

    for block in content:
        if not isinstance(block, dict):
            raise MessagesFormatError("content holds a block that is not an object")
        kind = block.get("type")
        if kind == "text":
            text = str(block.get("text", ""))
            if keep_text(text):
                parts.append({"type": part_type, "text": text})
        elif kind == "image" and role == "user":
            image = _image_part(block)
            if image is not None:
                parts.append(image)
        elif kind == "tool_use":
            flush()
            arguments = block.get("input") if block.get("input") is not None else {}
            items.append({"type": "function_call", "call_id": str(block.get("id", "")),
                          "name": str(block.get("name", "")), "arguments": json.dumps(arguments)})
        elif kind == "tool_result":
            flush()
            items.append({"type": "function_call_output", "call_id": str(block.get("tool_use_id", "")),
                          "output": output_of(result_text(block.get("content")))})
    flush()
    return items


def tool_input(arguments: Any) -> Any:
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"value": value}


def text_block(part: dict[str, Any]) -> dict[str, Any] | None:
    if part.get("type") in ("input_text", "output_text", "text") and part.get("text"):
        return {"type": "text", "text": str(part["text"])}
    if part.get("type") == "input_image" and isinstance(part.get("image_url"), str):
        url = part["image_url"]
        if url.startswith("data:") and ";base64," in url:
            media, data = url[5:].split(";base64,", 1)
            return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
        return {"type": "image", "source": {"type": "url", "url": url}}
    return None


def items_messages(items: list[Item]) -> list[dict[str, Any]]:
    """Responses items → Anthropic `messages`, the inverse of `content_items` (for a model call compactweb makes
    itself over the Messages API: a policy's summarisation on an Anthropic provider). A developer or system
    message has no role of its own there: it is the user's text. Consecutive blocks of one role make one message;
    items with no Messages equivalent (reasoning, compaction) are left out."""
    messages: list[dict[str, Any]] = []

    def add(role: str, block: dict[str, Any]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].append(block)
        else:
            messages.append({"role": role, "content": [block]})

    for item in items:
        kind = item.get("type")
        if kind == "message":
            role = "assistant" if item.get("role") == "assistant" else "user"
            content = item.get("content")
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
            for part in parts:
                block = text_block(part) if isinstance(part, dict) else None
                if block is not None:
                    add(role, block)
        elif kind == "function_call":
            add("assistant", {"type": "tool_use", "id": str(item.get("call_id", "")), "name": str(item.get("name", "")),
                              "input": tool_input(item.get("arguments"))})
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else result_text(output)
            add("user", {"type": "tool_result", "tool_use_id": str(item.get("call_id", "")), "content": text})
    return messages


def tools_of(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Responses function tools → Anthropic tools (`input_schema`)."""
    return [{"name": t["name"], "description": str(t.get("description") or ""),
             "input_schema": t.get("parameters") or {"type": "object", "properties": {}}}
            for t in tools if isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("name"), str)]


def usage_as_responses(usage: Any) -> dict[str, Any] | None:
    """Anthropic `usage` in the Responses shape: input = `input_tokens` + cache reads + cache writes (what the
    model read), cached = the cache reads (as the Claude Code transcript reader counts it)."""
    if not isinstance(usage, dict):
        return None

    def n(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    cached = n("cache_read_input_tokens")
    inp = n("input_tokens") + cached + n("cache_creation_input_tokens")
    out = n("output_tokens")
    return {"input_tokens": inp, "input_tokens_details": {"cached_tokens": cached}, "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": inp + out}
