"""Validation of Responses API items before anything is stored (spec §1.1 item shapes).

A bad item is refused with the path of the offending field (`items[3].content[0].text: must be a string`), and the
caller stores nothing. Plain Python, no Django.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from compaction_app.engine.items import Item, normalize_kind
from compaction_app.providers.simulated import codec

MESSAGE_ROLES = ("user", "assistant", "developer", "system")
MESSAGE_PHASES = ("commentary", "final_answer")
TEXT_PART_TYPES = ("input_text", "output_text", "text", "refusal", "summary_text", "reasoning_text")


class ItemValidationError(ValueError):
    """An item does not have a Responses item shape. `path` names the item and field."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")


def _require(item: dict, key: str, path: str) -> Any:
    if key not in item:
        raise ItemValidationError(f"{path}.{key}", "is required")
    return item[key]


def _string(item: dict, key: str, path: str, *, required: bool = True) -> None:
    if key not in item and not required:
        return
    value = _require(item, key, path)
    if not isinstance(value, str):
        raise ItemValidationError(f"{path}.{key}", "must be a string")


def _optional_string(item: dict, key: str, path: str) -> None:
    if item.get(key) is not None and not isinstance(item[key], str):
        raise ItemValidationError(f"{path}.{key}", "must be a string or null")


def _content_part(part: Any, path: str) -> None:
    if not isinstance(part, dict):
        raise ItemValidationError(path, "must be an object")
    kind = part.get("type")
    if not isinstance(kind, str):
        raise ItemValidationError(f"{path}.type", "is required and must be a string")
    if kind in TEXT_PART_TYPES:
        _string(part, "text", path)
    elif kind == "input_image":
        if not isinstance(part.get("image_url"), str) and not isinstance(part.get("file_id"), str):
            raise ItemValidationError(f"{path}.image_url", "an input_image needs an image_url or file_id string")
        if "detail" in part and part["detail"] not in ("auto", "low", "high", "original"):
            raise ItemValidationError(f"{path}.detail", "must be one of auto, low, high, original")
    elif kind == "input_file":
        pass
    else:
        raise ItemValidationError(f"{path}.type", f"unknown content part type {kind!r}")


def _parts(value: Any, path: str) -> None:
    if not isinstance(value, list):
        raise ItemValidationError(path, "must be a list of content parts")
    for i, part in enumerate(value):
        _content_part(part, f"{path}[{i}]")


def _message(item: dict, path: str) -> None:
    role = _require(item, "role", path)
    if role not in MESSAGE_ROLES:
        raise ItemValidationError(f"{path}.role", f"must be one of {', '.join(MESSAGE_ROLES)}")
    _parts(_require(item, "content", path), f"{path}.content")
    _optional_string(item, "id", path)
    if item.get("phase") is not None and item["phase"] not in MESSAGE_PHASES:
        raise ItemValidationError(f"{path}.phase", f"must be one of {', '.join(MESSAGE_PHASES)}")


def _call(item: dict, path: str, *, argument_key: str) -> None:
    _string(item, "call_id", path)
    _string(item, "name", path)
    _string(item, argument_key, path)


def _function_call(item: dict, path: str) -> None:
    _call(item, path, argument_key="arguments")


def _custom_tool_call(item: dict, path: str) -> None:
    _call(item, path, argument_key="input")


def _call_output(item: dict, path: str) -> None:
    _string(item, "call_id", path)
    output = _require(item, "output", path)
    if isinstance(output, list):
        _parts(output, f"{path}.output")
    elif not isinstance(output, str):
        raise ItemValidationError(f"{path}.output", "must be a string or a list of content parts")


def _encrypted_content(item: dict, path: str, *, required: bool = False) -> None:
    """A string (or null where optional); one carrying the simulated model's marker must inflate within its bound,
    so a decompression bomb is refused here instead of exploding in the next request to the model (issue 27)."""
    if required:
        _string(item, "encrypted_content", path)
    else:
        _optional_string(item, "encrypted_content", path)
    try:
        codec.decode(item.get("encrypted_content"))
    except codec.PayloadTooLarge as exc:
        raise ItemValidationError(f"{path}.encrypted_content", str(exc)) from None


def _reasoning(item: dict, path: str) -> None:
    summary = _require(item, "summary", path)
    if not isinstance(summary, list):
        raise ItemValidationError(f"{path}.summary", "must be a list")
    for i, part in enumerate(summary):
        _content_part(part, f"{path}.summary[{i}]")
    if item.get("content") is not None:
        _parts(item["content"], f"{path}.content")
    _encrypted_content(item, path)


def _compaction(item: dict, path: str) -> None:
    _encrypted_content(item, path, required=True)
    _optional_string(item, "id", path)


def _context_compaction(item: dict, path: str) -> None:
    _encrypted_content(item, path)


def _local_shell_call(item: dict, path: str) -> None:
    _optional_string(item, "call_id", path)
    action = _require(item, "action", path)
    if not isinstance(action, dict):
        raise ItemValidationError(f"{path}.action", "must be an object")


def _object_field(key: str) -> Callable[[dict, str], None]:
    def check(item: dict, path: str) -> None:
        if item.get(key) is not None and not isinstance(item[key], dict):
            raise ItemValidationError(f"{path}.{key}", "must be an object")

    return check


def _any(item: dict, path: str) -> None:
    return None


VALIDATORS: dict[str, Callable[[dict, str], None]] = {
    "message": _message,
    "function_call": _function_call,
    "function_call_output": _call_output,
    "custom_tool_call": _custom_tool_call,
    "custom_tool_call_output": _call_output,
    "local_shell_call": _local_shell_call,
    "tool_search_call": _any,
    "tool_search_output": _any,
    "web_search_call": _object_field("action"),
    "image_generation_call": _any,
    "reasoning": _reasoning,
    "compaction": _compaction,
    "compaction_summary": _compaction,
    "context_compaction": _context_compaction,
    "ghost_snapshot": _object_field("ghost_commit"),
}


def _no_nul(value: Any, path: str) -> None:
    # PostgreSQL's jsonb cannot hold U+0000; refusing it everywhere keeps SQLite and PostgreSQL identical.
    if isinstance(value, str):
        if "\x00" in value:
            raise ItemValidationError(path, "must not contain a NUL character (U+0000)")
    elif isinstance(value, dict):
        for key, inner in value.items():
            _no_nul(key, path)
            _no_nul(inner, f"{path}.{key}")
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            _no_nul(inner, f"{path}[{i}]")


def validate_item(item: Any, path: str = "item") -> Item:
    """Check one item's shape (spec §1.1) and return it normalised (`compaction_summary` → `compaction`)."""
    if not isinstance(item, dict):
        raise ItemValidationError(path, "must be an object")
    kind = item.get("type")
    if not isinstance(kind, str):
        raise ItemValidationError(f"{path}.type", "is required and must be a string")
    if kind == "compaction_trigger":
        raise ItemValidationError(f"{path}.type", "compaction_trigger is a request-only item and is never stored")
    validator = VALIDATORS.get(kind)
    if validator is None:
        raise ItemValidationError(f"{path}.type", f"unknown item type {kind!r}")
    validator(item, path)
    _no_nul(item, path)
    return normalize_kind(item)


def validate_items(items: Any, field: str = "items") -> list[Item]:
    """Check a list of items; the first bad one raises with its index (`items[3].content[0].text: ...`)."""
    if not isinstance(items, list):
        raise ItemValidationError(field, "must be a list of items")
    return [validate_item(item, f"{field}[{i}]") for i, item in enumerate(items)]


# Items that rewrite what the model is told rather than record a turn: a compaction (a summary that replaces the
# history before it) and developer/system instructions. Putting them into an existing session needs the support
# role (README, "Roles"), on every path (sessions_app.web.instructing): appended items, pins (re-injected as a
# developer message after each compaction) and the turn settings the turn loop writes into developer messages.
PRIVILEGED_MESSAGE_ROLES = ("developer", "system")
# Turn settings whose value sessions_app.turns.loop.context_update_items writes into a developer message
# (`<permissions instructions>`, `<model_switch>`); cwd goes into a user message.
INSTRUCTING_SETTINGS = ("approval_policy", "sandbox_policy", "model")


def privileged_settings_paths(settings: Any) -> list[str]:
    """The paths (`settings.model`) of a turn's settings change that would put the caller's text into a developer
    message; a malformed change yields none (the turn service refuses it with a 400)."""
    if not isinstance(settings, dict):
        return []
    return [f"settings.{key}" for key in INSTRUCTING_SETTINGS if settings.get(key) is not None]


def privileged_item_paths(items: list[Item]) -> list[str]:
    """The paths (`items[2]`) of the items whose append needs the support role."""
    paths: list[str] = []
    if not isinstance(items, list):
        return paths  # not a list at all: the item validation refuses it
    for index, item in enumerate(items):
        kind = normalize_kind(item).get("type") if isinstance(item, dict) else None
        if kind in ("compaction", "context_compaction") or (kind == "message" and item.get("role") in PRIVILEGED_MESSAGE_ROLES):
            paths.append(f"items[{index}]")
    return paths


def privileged_line_paths(lines: Iterable[bytes | str]) -> list[str]:
    """The paths (`line 3`, `line 7.replacement_history[2]`) of a rollout file's lines (Codex's JSON Lines, as an
    import or a shipped file brings them) that would put developer/system text or a compaction into the session:
    its `response_item` lines and the items of a `compacted` line's `replacement_history`. A line that is not JSON
    yields none (the importer reports it)."""
    paths: list[str] = []
    for number, raw in enumerate(lines, start=1):
        try:
            line = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser: the importer refuses it
            continue
        payload = line.get("payload") if isinstance(line, dict) else None
        if not isinstance(payload, dict):
            continue
        if line.get("type") == "response_item":
            paths += [f"line {number}" for _ in privileged_item_paths([payload])[:1]]
        elif line.get("type") == "compacted" and isinstance(payload.get("replacement_history"), list):
            paths += [f"line {number}.replacement_history{path.removeprefix('items')}"
                      for path in privileged_item_paths(payload["replacement_history"])]
    return paths


def validate_tools(tools: Any, field: str = "tools") -> list[dict[str, Any]]:
    """A Responses `tools` array: objects with a string `type`; a `function` tool needs a string `name`."""
    if not isinstance(tools, list):
        raise ItemValidationError(field, "must be a list of tool specs")
    for i, tool in enumerate(tools):
        path = f"{field}[{i}]"
        if not isinstance(tool, dict):
            raise ItemValidationError(path, "must be an object")
        if not isinstance(tool.get("type"), str) or not tool["type"]:
            raise ItemValidationError(f"{path}.type", "is required and must be a string")
        if tool["type"] == "function" and not isinstance(tool.get("name"), str):
            raise ItemValidationError(f"{path}.name", "a function tool needs a name string")
        _no_nul(tool, path)
    return tools
