"""Response item kinds and the predicates compaction relies on (spec §1.1-§1.3).

Items are plain dicts in the OpenAI Responses item shape; nothing here mutates them.
"""

from __future__ import annotations

from typing import Any

Item = dict[str, Any]

SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its thinking process. "
    "You also have access to the state of the tools that were used by that language model. Use this to build on "
    "the work that has already been done and avoid duplicating work. Here is the summary produced by the other "
    "language model, use the information in this summary to assist with your own analysis:"
)

COMPACTION_KINDS = frozenset({"compaction", "context_compaction"})
TOOL_CALL_KINDS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "tool_search_call"})
TOOL_OUTPUT_KINDS = frozenset({"function_call_output", "custom_tool_call_output", "tool_search_output"})
# spec §2.4 item 2: calls the client executes, so their output needs a follow-up request. A `tool_search_call` the
# server already ran (`execution: "server"`) needs none; web search and image generation are server-side too.
CLIENT_EXECUTED_CALL_KINDS = TOOL_CALL_KINDS
SERVER_EXECUTION = "server"
# spec §3.2: items the model produced; the window total restarts from server usage after the newest of them.
MODEL_GENERATED_KINDS = frozenset(
    {
        "reasoning",
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "tool_search_call",
        "web_search_call",
        "image_generation_call",
        *COMPACTION_KINDS,
    }
)

# spec §1.2: marker pairs whose presence makes a user message "contextual" (injected, not typed by the user). As in
# Codex, the AGENTS.md fragment needs both its markers: the "# AGENTS.md instructions for " heading and the closing
# "</INSTRUCTIONS>" (a user who types that heading alone is still a user).
AGENTS_MD_MARKERS = ("# AGENTS.md instructions for ", "</INSTRUCTIONS>")
CONTEXTUAL_MARKER_PAIRS = (
    AGENTS_MD_MARKERS,
    ("<user_instructions>", "</user_instructions>"),
    ("<environment_context>", "</environment_context>"),
    ("<skill>", "</skill>"),
    ("<user_shell_command>", "</user_shell_command>"),
    ("<turn_aborted>", "</turn_aborted>"),
    ("<subagent_notification>", "</subagent_notification>"),
)
# Three legacy model warnings Codex filters out (spec §1.2), matched on the trimmed text exactly as Codex emits them:
# two by prefix, the apply_patch one by prefix and suffix.
LEGACY_WARNING_PREFIXES = (
    "Warning: The maximum number of unified exec processes you can keep open is",
    "Warning: Your account was flagged for potentially high-risk cyber activity",
)
LEGACY_APPLY_PATCH_WARNING = (
    "Warning: apply_patch was requested via ",
    "Use the apply_patch tool instead of exec_command.",
)
HOOK_PROMPT_OPEN = "<hook_prompt"
HOOK_PROMPT_CLOSE = "</hook_prompt>"
IMAGE_LABELS = ("<image>", "</image>")

# Rust's `str::trim` strips characters with the Unicode White_Space property, and only those (Python's
# `str.strip` also strips U+001C..U+001F).
RUST_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def rust_trim(text: str) -> str:
    """`text.trim()` as Rust does it (spec §1.2)."""
    return text.strip(RUST_WHITESPACE)


def _ascii_lower(text: str) -> str:
    return text.translate(_ASCII_LOWER)


def _starts_with_ascii_ci(text: str, prefix: str) -> bool:
    return _ascii_lower(text[: len(prefix)]) == _ascii_lower(prefix)


def _ends_with_ascii_ci(text: str, suffix: str) -> bool:
    return len(text) >= len(suffix) and _ascii_lower(text[len(text) - len(suffix):]) == _ascii_lower(suffix)


def normalize_kind(item: Item) -> Item:
    """Write the `compaction_summary` alias back as `compaction` (spec §1.1)."""
    if item.get("type") == "compaction_summary":
        return {**item, "type": "compaction"}
    return item


def text_parts(item: Item) -> list[str]:
    """The text of every input_text/output_text part of a message, in order."""
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        p.get("text", "")
        for p in content
        if isinstance(p, dict) and p.get("type") in ("input_text", "output_text", "text")
    ]


def _is_image(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "input_image"


def message_text(item: Item) -> str:
    """A message's text: its text parts joined with no separator (spec §1.2). An `<image>` / `</image>` label
    around an image is skipped; a label with no image next to it is ordinary text."""
    content = item.get("content")
    if not isinstance(content, list):
        return "".join(text_parts(item))
    out = []
    for i, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") not in ("input_text", "output_text", "text"):
            continue
        text = part.get("text", "")
        label = rust_trim(text) if isinstance(text, str) else ""
        if label == IMAGE_LABELS[0] and i + 1 < len(content) and _is_image(content[i + 1]):
            continue
        if label == IMAGE_LABELS[1] and i > 0 and _is_image(content[i - 1]):
            continue
        out.append(text)
    return "".join(out)


def is_message(item: Item, role: str | None = None) -> bool:
    return item.get("type") == "message" and (role is None or item.get("role") == role)


def _matches_pair(text: str, open_tag: str, close_tag: str) -> bool:
    """The trimmed text starts and ends with the marker pair, ASCII case-insensitively (spec §1.2)."""
    t = rust_trim(text)
    return _starts_with_ascii_ci(t, open_tag) and _ends_with_ascii_ci(t, close_tag)


def is_legacy_warning(text: str) -> bool:
    """One of the three legacy model warnings Codex never treats as user input (spec §1.2)."""
    t = rust_trim(text)
    if any(t.startswith(prefix) for prefix in LEGACY_WARNING_PREFIXES):
        return True
    head, tail = LEGACY_APPLY_PATCH_WARNING
    return t.startswith(head) and t.endswith(tail)


def is_contextual_text(text: str) -> bool:
    """Whether one text part is injected context rather than something the user typed (spec §1.2)."""
    stripped = rust_trim(text)
    if any(_matches_pair(stripped, o, c) for o, c in CONTEXTUAL_MARKER_PAIRS):
        return True
    return is_legacy_warning(stripped)


def hook_prompt_run_id(text: str) -> str | None:
    """The `hook_run_id` of a `<hook_prompt hook_run_id="…">…</hook_prompt>` fragment; None when the text is not
    such a fragment or its run id is empty (spec §1.2)."""
    t = rust_trim(text)
    end = t.find(">")
    if end < 0 or not t.startswith(HOOK_PROMPT_OPEN) or not t.endswith(HOOK_PROMPT_CLOSE):
        return None
    tag = t[: end + 1]
    if len(t) < end + 1 + len(HOOK_PROMPT_CLOSE):
        return None
    start = tag.find('hook_run_id="')
    if start < 0:
        return None
    start += len('hook_run_id="')
    stop = tag.find('"', start)
    if stop < 0:
        return None
    run_id = tag[start:stop]
    return run_id if rust_trim(run_id) else None


def is_hook_prompt_text(text: str) -> bool:
    return hook_prompt_run_id(text) is not None


def is_contextual_user_message(item: Item) -> bool:
    """A user message any of whose text parts is contextual, or a hook-prompt fragment (spec §1.2)."""
    if not is_message(item, "user"):
        return False
    return any(is_contextual_text(t) or is_hook_prompt_text(t) for t in text_parts(item))


def is_hook_prompt_message(item: Item) -> bool:
    """A user message every part of which is a hook-prompt fragment with a non-empty run id (spec §1.2)."""
    if not is_message(item, "user"):
        return False
    content = item.get("content")
    parts = content if isinstance(content, list) else [{"type": "input_text", "text": content}]
    return bool(parts) and all(
        isinstance(p, dict) and p.get("type") in ("input_text", "text") and isinstance(p.get("text"), str)
        and is_hook_prompt_text(p["text"])
        for p in parts
    )


def is_summary_message(item: Item) -> bool:
    """A user message whose text starts with SUMMARY_PREFIX followed by a newline (spec §1.3)."""
    return is_message(item, "user") and message_text(item).startswith(SUMMARY_PREFIX + "\n")


def is_user_turn_boundary(item: Item) -> bool:
    """A user message that is not contextual: a turn the user started (summaries included, spec §1.2, §8.3)."""
    return is_message(item, "user") and not is_contextual_user_message(item)


def is_real_user_message(item: Item) -> bool:
    """A user turn boundary that is not a summary: what local compaction collects (spec §1.2, §4.1 step 7)."""
    return is_user_turn_boundary(item) and not is_summary_message(item)


def is_model_generated(item: Item) -> bool:
    """Items the model produced: assistant messages, reasoning, tool calls, compaction (spec §3.2)."""
    return is_message(item, "assistant") or item.get("type") in MODEL_GENERATED_KINDS


def is_compaction_item(item: Item) -> bool:
    return item.get("type") in COMPACTION_KINDS or item.get("type") == "compaction_summary"


def user_message(text: str) -> Item:
    """A user message in the Responses shape with one input_text part."""
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def call_id_of(item: Item) -> str | None:
    return item.get("call_id") if item.get("type") in TOOL_CALL_KINDS | TOOL_OUTPUT_KINDS else None


def needs_client_output(item: Item) -> bool:
    """A tool call the client must execute and answer before the model can go on (spec §2.4 item 2)."""
    if item.get("type") not in CLIENT_EXECUTED_CALL_KINDS:
        return False
    return not (item.get("type") == "tool_search_call" and item.get("execution") == SERVER_EXECUTION)


def output_call_id(item: Item) -> str:
    """The call id an output answers: `call_id`, or for a `local_shell_call` without one its `id` (as Codex)."""
    return str(item.get("call_id") or (item.get("id") if item.get("type") == "local_shell_call" else "") or "")
