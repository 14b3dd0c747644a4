"""Conversion between Responses API items and chat-completions messages (both directions).

Used by the chat adapter (items → messages, chunks → items) and by the simulated provider's chat endpoint
(messages → items). Developer messages become `system` messages because many local OpenAI-compatible servers reject
the `developer` role; the first system message carries the instructions. Reasoning and compaction items have no
chat equivalent and are dropped.
"""

from __future__ import annotations

import json
from typing import Any

from compaction_app.engine.items import message_text

Item = dict[str, Any]
Message = dict[str, Any]


def _content_for_chat(item: Item) -> str | list[dict[str, Any]]:
    content = item.get("content")
    if isinstance(content, list) and any(isinstance(p, dict) and p.get("type") == "input_image" for p in content):
        parts: list[dict[str, Any]] = []
        for part in content:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "input_image" and part.get("image_url"):
                parts.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
            elif part.get("type") in ("input_text", "output_text", "text"):
                parts.append({"type": "text", "text": part.get("text", "")})
        return parts
    return message_text(item)


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "".join(p.get("text", "") for p in output if isinstance(p, dict))
    if isinstance(output, dict) and isinstance(output.get("content"), str):
        return output["content"]
    return json.dumps(output)


def items_to_messages(items: list[Item], instructions: str = "") -> list[Message]:
    """Responses input items → chat messages (system from instructions; calls → assistant tool_calls)."""
    messages: list[Message] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    for item in items:
        kind = item.get("type")
        if kind == "message" or (kind is None and "role" in item):
            role = item.get("role", "user")
            role = "system" if role == "developer" else role
            messages.append({"role": role, "content": _content_for_chat(item)})
        elif kind in ("function_call", "custom_tool_call"):
            arguments = item.get("arguments") if kind == "function_call" else json.dumps({"input": item.get("input")})
            call = {
                "id": item.get("call_id") or item.get("id") or "",
                "type": "function",
                "function": {"name": item.get("name", ""), "arguments": arguments or "{}"},
            }
            last = messages[-1] if messages else None
            # Parallel calls of one assistant step travel as one assistant message with several tool_calls.
            if last is not None and last["role"] == "assistant" and "tool_calls" in last:
                last["tool_calls"].append(call)
            elif last is not None and last["role"] == "assistant" and isinstance(last.get("content"), str):
                last["tool_calls"] = [call]
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            messages.append(
                {"role": "tool", "tool_call_id": item.get("call_id", ""), "content": _output_text(item.get("output"))}
            )
        # reasoning, compaction, compaction_trigger and other kinds have no chat form.
    return messages


def tools_to_chat(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Responses function tools → chat `tools`; non-function tools are dropped."""
    out = []
    for tool in tools:
        if tool.get("type") != "function":
            continue
        if isinstance(tool.get("function"), dict):
            out.append(tool)
            continue
        fn = {"name": tool.get("name", "")}
        if tool.get("description"):
            fn["description"] = tool["description"]
        fn["parameters"] = tool.get("parameters") or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": fn})
    return out


def tool_names(tools: list[dict[str, Any]]) -> list[str]:
    """Names of function tools in either Responses or chat form."""
    names = []
    for tool in tools:
        fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        if isinstance(fn.get("name"), str) and fn["name"]:
            names.append(fn["name"])
    return names


def _text_of_chat_content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def messages_to_items(messages: list[Message]) -> tuple[str, list[Item]]:
    """Chat messages → (instructions, Responses items); the inverse of items_to_messages."""
    instructions = ""
    items: list[Item] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        text = _text_of_chat_content(message.get("content"))
        if role == "system" and index == 0:
            instructions = text
        elif role in ("system", "developer"):
            items.append({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": text}]})
        elif role == "user":
            items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
        elif role == "assistant":
            if text:
                items.append(assistant_message(text))
            for call in message.get("tool_calls") or []:
                fn = call.get("function") or {}
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.get("id", ""),
                        "name": fn.get("name", ""),
                        "arguments": fn.get("arguments") or "{}",
                    }
                )
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": message.get("tool_call_id", ""), "output": text})
    return instructions, items


def assistant_message(text: str, item_id: str | None = None) -> Item:
    item: Item = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    if item_id:
        item = {"id": item_id, **item}
    return item
