"""Arguments for any tool a client offers, generated from the tool's JSON schema (issue 13, item 6).

A real client (the Codex CLI) offers tools the simulated model has never heard of by name: `exec_command` needs
`cmd`, `write_stdin` needs the `session_id` of a running process, `namespace` entries group sub-tools, and
`web_search` is not a function at all. The model must only call what it can call correctly:

- `callable_tools` keeps the offered *function* tools (Responses or chat form) with their parameter schemas; a
  `namespace`, `web_search` or other non-function tool is never called.
- `arguments_for` fills every required field of a schema with a plausible value (enums take their first value,
  numbers their minimum, nested objects and arrays are built recursively), using hints from the conversation:
  a command field gets a command that works in an empty scratch folder, a path field the file the user named.
- A required top-level field that refers to something that must already exist (`session_id`, `agent_id`,
  `target`, `id`) cannot be invented: `arguments_for` returns None unless the conversation holds such a value (Codex reports
  `Process running with session ID 7` for a command still running), and the model does not call that tool.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Commands that succeed in an empty, writable scratch folder; writes come before the reads that need them.
SCRATCH_COMMANDS = (
    "ls -a",
    "printf '%s\\n' '{word}' >> notes.txt",
    "cat notes.txt",
    "wc -l notes.txt",
    "pwd",
)
COMMAND_FIELDS = frozenset({"cmd", "command", "script"})
PATH_FIELDS = frozenset({"path", "file", "file_path", "filepath", "filename"})
QUERY_FIELDS = frozenset({"query", "pattern", "q", "search"})
# Field names that name an existing object; a value must come from the conversation, never be made up.
REFERENCE_FIELDS = frozenset({"id", "target", "session_id", "agent_id", "process_id", "thread_id", "call_id"})
NON_FUNCTION_TYPES = frozenset({"namespace", "web_search", "web_search_preview", "file_search", "local_shell",
                                "custom", "image_generation", "code_interpreter", "mcp"})
_SESSION_ID = re.compile(r"session ID (\d+)", re.IGNORECASE)
MAX_DEPTH = 6


class Unsatisfiable(Exception):
    """A required field the model cannot fill honestly."""


@dataclass(frozen=True)
class Hints:
    """What the conversation offers to fill arguments with."""

    word: str = "notes"
    path: str = "notes.txt"
    n: int = 0
    references: Mapping[str, Any] = field(default_factory=dict)

    def command(self) -> str:
        return SCRATCH_COMMANDS[self.n % len(SCRATCH_COMMANDS)].format(word=self.word)


def callable_tools(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Name → parameters schema of every offered function tool, in offer order (Responses or chat form)."""
    out: dict[str, dict[str, Any]] = {}
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        if tool.get("type") in NON_FUNCTION_TYPES or (tool.get("type") not in (None, "function")):
            continue
        name = fn.get("name")
        if isinstance(name, str) and name:
            params = fn.get("parameters")
            out[name] = params if isinstance(params, dict) else {}
    return out


def references_in(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Values the conversation holds for reference fields: the newest running exec session id."""
    found: dict[str, Any] = {}
    for item in items:
        if item.get("type") != "function_call_output":
            continue
        raw = item.get("output")
        text = raw if isinstance(raw, str) else str(raw)
        match = _SESSION_ID.search(text)
        if match:
            found["session_id"] = int(match.group(1))
    return found


def arguments_for(parameters: dict[str, Any] | None, hints: Hints) -> dict[str, Any] | None:
    """Arguments that satisfy `parameters` (every required field, plausible values), or None when a required
    field cannot be filled honestly."""
    try:
        value = _object(parameters or {}, hints, depth=0, top_level=True)
    except Unsatisfiable:
        return None
    return value


def _object(schema: dict[str, Any], hints: Hints, *, depth: int, top_level: bool = False) -> dict[str, Any]:
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = [r for r in schema.get("required") or [] if isinstance(r, str)]
    out: dict[str, Any] = {}
    for name in required:
        out[name] = _value(name, properties.get(name) or {}, hints, depth=depth + 1)
    if top_level:
        # The main field of a known kind is worth filling even when optional (a `command` the tool defaults).
        for name, sub in properties.items():
            if name not in out and name in COMMAND_FIELDS | PATH_FIELDS and _type_of(sub) in ("string", None):
                out[name] = _value(name, sub, hints, depth=depth + 1)
                break
    return out


def _type_of(schema: dict[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return kind if isinstance(kind, str) else None


def _value(name: str, schema: dict[str, Any], hints: Hints, *, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise Unsatisfiable(name)
    key = name.lower()
    # A top-level id names an existing object; inside a nested value it is a label the model chooses.
    if depth == 1 and (key in REFERENCE_FIELDS or key.endswith("_id")):
        if key in hints.references:
            return hints.references[key]
        raise Unsatisfiable(name)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for combinator in ("anyOf", "oneOf", "allOf"):
        options = schema.get(combinator)
        if isinstance(options, list) and options:
            for option in options:
                try:
                    return _value(name, option if isinstance(option, dict) else {}, hints, depth=depth + 1)
                except Unsatisfiable:
                    continue
            raise Unsatisfiable(name)
    kind = _type_of(schema)
    if kind == "object" or (kind is None and "properties" in schema):
        return _object(schema, hints, depth=depth)
    if kind == "array":
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        if key in COMMAND_FIELDS and _type_of(items) in ("string", None):
            return ["bash", "-lc", hints.command()]
        count = max(1, int(schema.get("minItems") or 1))
        return [_value(name.rstrip("s") or name, items, hints, depth=depth + 1) for _ in range(count)]
    if kind in ("integer", "number"):
        if isinstance(schema.get("minimum"), int | float):
            return int(schema["minimum"])
        if isinstance(schema.get("exclusiveMinimum"), int | float):
            return int(schema["exclusiveMinimum"]) + 1
        return 1
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return _string(key, schema, hints)


def _string(key: str, schema: dict[str, Any], hints: Hints) -> str:
    if key in COMMAND_FIELDS:
        text = hints.command()
    elif key in PATH_FIELDS or key.endswith("path"):
        text = hints.path
    elif key in QUERY_FIELDS:
        text = hints.word
    elif key == "id" or key.endswith("_id"):
        text = f"{hints.word}_1"
    else:
        text = f"{key.replace('_', ' ')}: {hints.word}"
    minimum = int(schema.get("minLength") or 0)
    maximum = schema.get("maxLength")
    if len(text) < minimum:
        text = text.ljust(minimum, ".")
    if isinstance(maximum, int) and maximum >= 0:
        text = text[:maximum]
    return text
