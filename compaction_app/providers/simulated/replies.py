"""The simulated model's turn replies: deterministic, derived from the conversation it was sent.

For the current user turn (items after the last real user message) the model makes a number of tool calls fixed by
a hash of that message (0..4), one per response, each preceded by a reasoning item; then it answers with an
assistant message that reports the tool results it saw. Same input, same output.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from compaction_app.engine.items import (
    is_compaction_item,
    is_real_user_message,
    is_summary_message,
    message_text,
)
from compaction_app.providers.chat_format import assistant_message
from compaction_app.providers.simulated import codec
from compaction_app.providers.simulated.summarizer import FILE_PATTERN, Digest, digest, render
from compaction_app.providers.simulated.tool_arguments import (
    Hints,
    arguments_for,
    callable_tools,
    references_in,
)

MAX_TOOL_CALLS_PER_TURN = 4
KNOWN_TOOLS = ("shell", "read_file", "search", "apply_patch")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
_STOPWORDS = frozenset({"please", "could", "would", "should", "with", "that", "this", "from", "into", "then",
                        "them", "have", "make", "sure", "also", "what", "when", "where", "which", "there"})


def stable_hash(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()[:8], "big")


def short_id(prefix: str, *parts: str) -> str:
    return f"{prefix}_{stable_hash(*parts):016x}"


def current_turn(items: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(text of the last real user message, the items after it)."""
    for index in range(len(items) - 1, -1, -1):
        if is_real_user_message(items[index]):
            return message_text(items[index]), items[index + 1 :]
    return "", list(items)


def planned_tool_calls(user_text: str) -> int:
    """How many tool calls the model makes for this user message (0..4, from its hash)."""
    return stable_hash("calls", user_text) % (MAX_TOOL_CALLS_PER_TURN + 1)


def _keywords(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if w.lower() not in _STOPWORDS]


def _target_file(user_text: str, n: int) -> str:
    files = [m.group(1) for m in FILE_PATTERN.finditer(user_text)]
    if files:
        return files[n % len(files)]
    words = _keywords(user_text) or ["module"]
    return f"src/{words[stable_hash('file', user_text) % len(words)].lower()}.py"


def tool_arguments(name: str, user_text: str, n: int) -> dict[str, Any]:
    """Plausible arguments for a known tool, derived from the user text; {} for tools the model does not know."""
    path = _target_file(user_text, n)
    words = _keywords(user_text) or ["TODO"]
    word = words[(stable_hash("word", user_text) + n) % len(words)]
    if name == "shell":
        stem = path.rsplit("/", 1)[-1].removesuffix(".py")
        test = path if path.rsplit("/", 1)[-1].startswith("test_") else f"tests/test_{stem}.py"
        commands = [f"pytest -q {test}", f"grep -rn {word} .", f"python -m py_compile {path}", "git status --short"]
        return {"command": commands[n % len(commands)]}
    if name == "read_file":
        return {"path": path}
    if name == "search":
        return {"query": word}
    if name == "apply_patch":
        patch = (f"*** Begin Patch\n*** Update File: {path}\n@@\n-# {word}: TODO\n+# {word}: done\n*** End Patch\n")
        return {"patch": patch}
    return {}


# Argument names differ between tool sets (Codex's grep tool takes `pattern`, its apply_patch takes `input`); the
# model writes whichever name the offered tool's schema declares.
ARGUMENT_ALIASES = {"query": ("pattern", "query"), "patch": ("input", "patch")}


def fit_to_schema(args: dict[str, Any], parameters: dict[str, Any] | None) -> dict[str, Any]:
    """Rename arguments to the names the tool declares and wrap a command string when it wants an array."""
    properties = (parameters or {}).get("properties")
    if not isinstance(properties, dict) or not properties:
        return args
    fitted: dict[str, Any] = {}
    for key, value in args.items():
        target = next((k for k in (key, *ARGUMENT_ALIASES.get(key, ())) if k in properties), None)
        if target is None:
            continue
        if (properties[target] or {}).get("type") == "array" and isinstance(value, str):
            value = ["bash", "-lc", value] if key == "command" else [value]
        fitted[target] = value
    return fitted


# Tools whose arguments this model writes from the user text, preferred over any other offered tool.
PREFERRED_TOOLS = (*KNOWN_TOOLS, "exec_command")


def planned_call(tools: list[dict[str, Any]], items: list[dict[str, Any]], user_text: str,
                 n: int, *, references: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]] | None:
    """(tool name, arguments) for the n-th call of this turn, or None when no offered tool can be called
    correctly. Known tools get arguments from the user text (fitted to their schema); any other function tool
    gets arguments generated from its schema, and a tool with a required field the model cannot fill (the
    `session_id` of a process that is not running) is never chosen (see `tool_arguments`)."""
    schemas = callable_tools(tools)
    words = _keywords(user_text) or ["notes"]
    hints = Hints(word=words[(stable_hash("word", user_text) + n) % len(words)].lower(),
                  path=_target_file(user_text, n) if FILE_PATTERN.search(user_text) else "notes.txt",
                  n=n, references=references_in(items) if references is None else references)
    candidates: dict[str, dict[str, Any]] = {}
    for name, schema in schemas.items():
        if name in KNOWN_TOOLS:
            candidates[name] = fit_to_schema(tool_arguments(name, user_text, n), schema)
            continue
        args = arguments_for(schema, hints)
        if args is not None:
            candidates[name] = args
    if not candidates:
        return None
    preferred = [name for name in PREFERRED_TOOLS if name in candidates]
    pool = preferred or list(candidates)
    name = pool[stable_hash("tool", user_text, str(n)) % len(pool)]
    return name, candidates[name]


def remembered_digest(items: list[dict[str, Any]], compaction_positions: list[int] | None = None) -> Digest | None:
    """The digest carried by the newest compaction item in the input, if the simulator made it.
    `compaction_positions` (where the input's compaction items are, when the caller knows) spares the scan."""
    candidates = reversed(items) if compaction_positions is None else (items[i] for i in reversed(compaction_positions))
    for item in candidates:
        if is_compaction_item(item):
            payload = codec.decode(item.get("encrypted_content"))
            if payload and payload.get("kind") == "compaction":
                return Digest.from_payload(payload.get("digest") or {})
    return None


def turn_reply(body: dict[str, Any], *, compaction_positions: list[int] | None = None,
               references: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Output items for a normal turn: [reasoning, function_call] or [assistant message].
    `compaction_positions` (where the input's compaction items are) and `references` (`references_in` of the
    input): what a caller that counted the input item by item already knows, so the reply does not walk it."""
    items = body.get("input") or []
    if compaction_positions is None:  # a caller that knows where the compaction items are has checked the input
        items = [i for i in items if isinstance(i, dict)]
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    user_text, turn = current_turn(items)
    calls_made = [i for i in turn if i.get("type") == "function_call"]
    n = len(calls_made)
    seed = f"{len(items)}:{user_text}"
    # A summary or compaction item after the user's message means a mid-turn compaction folded this turn's tool
    # work away; the model carries on from the summary and wraps up instead of starting its plan over.
    compacted_mid_turn = any(is_compaction_item(i) or is_summary_message(i) for i in turn)
    planned = None
    if tools and not compacted_mid_turn and n < planned_tool_calls(user_text):
        planned = planned_call(tools, items, user_text, n, references=references)
    if planned is not None:
        name, args = planned
        thought = f"To handle '{user_text[:80]}' I will call {name} (step {n + 1})."
        reasoning = {
            "type": "reasoning",
            "id": short_id("rs", seed, str(n)),
            "summary": [{"type": "summary_text", "text": thought}],
            "encrypted_content": codec.encode({"kind": "reasoning", "thought": thought}),
        }
        call = {
            "type": "function_call",
            "id": short_id("fc", seed, str(n)),
            "call_id": short_id("call", seed, str(n)),
            "name": name,
            "arguments": json.dumps(args),
        }
        return [reasoning, call]
    return [assistant_message(_final_text(items, user_text, turn, compaction_positions), short_id("msg", seed, "final"))]


def _final_text(items: list[dict[str, Any]], user_text: str, turn: list[dict[str, Any]],
                compaction_positions: list[int] | None = None) -> str:
    outputs = {i.get("call_id"): i for i in turn if i.get("type") == "function_call_output"}
    lines = []
    if user_text:
        lines.append(f"Done with: {user_text[:200]}")
    else:
        lines.append("Nothing was asked yet.")
    for call in (i for i in turn if i.get("type") == "function_call"):
        output = outputs.get(call.get("call_id"))
        result = "no output"
        if output is not None:
            raw = output.get("output")
            text = raw if isinstance(raw, str) else json.dumps(raw)
            result = _first_telling_line(text)
        lines.append(f"- {call.get('name')} {call.get('arguments')}: {result}")
    remembered = remembered_digest(items, compaction_positions)
    if remembered is not None and remembered.goals:
        lines.append("Continuing the earlier work on: " + "; ".join(g[:80] for g in remembered.goals[-3:]))
    return "\n".join(lines)


# Codex frames a command's output with bookkeeping lines; the model reports the first line that says something.
_FRAME_PREFIXES = ("Chunk ID:", "Wall time:", "Original token count:", "Output:")


def _first_telling_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    telling = [line for line in lines if not line.startswith(_FRAME_PREFIXES)]
    return ((telling or lines or ["(empty)"])[0])[:160]


def summary_reply(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer to a summarization prompt: one assistant message holding the extractive summary."""
    items = [i for i in body.get("input") or [] if isinstance(i, dict)]
    text = render(digest(items))
    return [assistant_message(text, short_id("msg", "summary", text))]
