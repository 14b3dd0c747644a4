"""The simulated model's extractive summary of a conversation (what a handoff summary should hold, spec §1.3).

Nothing is invented: goals are the real user messages, progress is what the assistant said, files and commands are
pulled from tool calls, outputs and messages by pattern, errors are the lines that look like failures, and next steps
follow from the last goal and any unresolved error. Summaries remembered in compaction items (decoded with `codec`)
and earlier local summary messages are carried forward, so a chain of compactions keeps its oldest goals.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from compaction_app.engine.items import (
    SUMMARY_PREFIX,
    is_compaction_item,
    is_message,
    is_real_user_message,
    is_summary_message,
    message_text,
)
from compaction_app.engine.retention.facts import arguments, command_of
from compaction_app.providers.simulated import codec

FILE_PATTERN = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:py|pyi|js|jsx|ts|tsx|md|toml|json|ya?ml|txt|rs|go|html|css|cfg|ini|sh|"
    r"sql|c|h|cpp|java|rb|lock|csv))\b"
)
ERROR_PATTERN = re.compile(r"Traceback|FAILED|\w*Error\b|\bERROR\b|\berror:|Exception\b")
NEXT_STEP_PATTERN = re.compile(r"^\s*(?:next(?: step)?s?\s*[:\-]|todo\s*[:\-]|- \[ \])\s*(.+)$", re.IGNORECASE)
SUMMARY_REQUEST_MARKERS = ("CONTEXT CHECKPOINT COMPACTION", "checkpoint", "summary", "summarize", "summarise", "handoff")

MAX_GOALS = 20
MAX_ENTRIES = 12
MAX_LINE = 240


@dataclass
class Digest:
    goals: list[str] = field(default_factory=list)
    progress: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    remembered: list[str] = field(default_factory=list)
    compactions_seen: int = 0

    def to_payload(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> Digest:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in payload.items() if k in known})


def _clip(text: str, limit: int = MAX_LINE) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _add(values: list[str], value: str) -> None:
    if value and value not in values:
        values.append(value)


def _keep_last(values: list[str], limit: int = MAX_ENTRIES) -> list[str]:
    return values[-limit:]


def is_summarization_prompt(text: str) -> bool:
    """Whether a user message asks for a handoff summary (the default prompt or a custom one, spec §4.1 step 2)."""
    lowered = text.lower()
    return any(marker.lower() in lowered for marker in SUMMARY_REQUEST_MARKERS)


def is_summarization_request(body: dict[str, Any]) -> bool:
    """A `/responses` request with no tools whose last user message asks for a summary (spec §4.1 step 3)."""
    if body.get("tools"):
        return False
    items = body.get("input") or []
    # The newest user message, found from the end: a request's cost does not grow with the history before it.
    last_user = next((i for i in reversed(items) if isinstance(i, dict) and is_message(i, "user")), None)
    return last_user is not None and is_summarization_prompt(message_text(last_user))


def _command_of(item: dict[str, Any]) -> str | None:
    """A shell call's command line as the summary quotes it: what the retention checks call a command, clipped."""
    command = command_of(item)
    return _clip(command) if command else None


def _output_text(item: dict[str, Any]) -> str:
    output = item.get("output")
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(p.get("text", "") for p in output if isinstance(p, dict))
    return json.dumps(output) if output is not None else ""


def digest(items: list[dict[str, Any]], *, drop_prompt: bool = True) -> Digest:
    """Extract a Digest from a conversation; the trailing summarization prompt itself is ignored."""
    items = list(items)
    if drop_prompt and items and is_message(items[-1], "user") and is_summarization_prompt(message_text(items[-1])):
        items = items[:-1]
    d = Digest()
    last_error_index = -1
    last_assistant_index = -1
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if is_compaction_item(item) or (kind == "reasoning" and item.get("encrypted_content")):
            payload = codec.decode(item.get("encrypted_content"))
            if payload and payload.get("kind") == "compaction":
                _merge(d, Digest.from_payload(payload.get("digest") or {}))
            continue
        if is_summary_message(item):
            body = message_text(item)[len(SUMMARY_PREFIX) + 1 :]
            for line in body.splitlines():
                if line.strip().startswith("- ") and "(none)" not in line:
                    _add(d.remembered, _clip(line.strip()[2:]))
            _scan_text(d, body, errors=False)
            continue
        if is_real_user_message(item):
            text = message_text(item)
            _add(d.goals, _clip(text, 300))
            _scan_text(d, text, errors=False)
        elif is_message(item, "assistant"):
            text = message_text(item)
            if text.strip():
                _add(d.progress, _clip(text))
                last_assistant_index = index
                _scan_text(d, text, errors=False)
                for line in text.splitlines():
                    match = NEXT_STEP_PATTERN.match(line)
                    if match:
                        _add(d.next_steps, _clip(match.group(1)))
        elif kind in ("function_call", "local_shell_call", "custom_tool_call"):
            command = _command_of(item)
            if command:
                _add(d.commands, command)
            _scan_text(d, json.dumps(arguments(item, keep_unparsed=True)) if kind == "function_call" else json.dumps(item), errors=False)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            if _scan_text(d, _output_text(item), errors=True):
                last_error_index = index
    if last_error_index > last_assistant_index and d.errors:
        _add(d.next_steps, _clip(f"Resolve the latest error: {d.errors[-1]}"))
    if d.goals:
        _add(d.next_steps, _clip(f"Finish and verify the latest request: {d.goals[-1]}"))
    d.goals = d.goals[-MAX_GOALS:]
    d.progress = _keep_last(d.progress)
    d.files = _keep_last(d.files, 30)
    d.commands = _keep_last(d.commands)
    d.errors = _keep_last(d.errors)
    d.next_steps = _keep_last(d.next_steps, 6)
    d.remembered = _keep_last(d.remembered, 30)
    return d


def _scan_text(d: Digest, text: str, *, errors: bool) -> bool:
    """Collect file paths (and failure lines, when `errors`); return whether an error line was found."""
    for match in FILE_PATTERN.finditer(text):
        _add(d.files, match.group(1))
    found = False
    if errors:
        for line in text.splitlines():
            if ERROR_PATTERN.search(line):
                _add(d.errors, _clip(line.strip(), 200))
                found = True
    return found


def _merge(into: Digest, earlier: Digest) -> None:
    """Carry an earlier compaction's digest forward: its goals become remembered context, its files stay known."""
    into.compactions_seen += 1 + earlier.compactions_seen
    for value in earlier.remembered + [f"earlier goal: {g}" for g in earlier.goals]:
        _add(into.remembered, value)
    for value in earlier.files:
        _add(into.files, value)
    for value in earlier.commands:
        _add(into.commands, value)
    for value in earlier.errors:
        _add(into.errors, value)


def _section(title: str, values: list[str], *, code: bool = False) -> list[str]:
    lines = [f"{title}:"]
    if not values:
        return [*lines, "- (none)"]
    return lines + [f"- `{v}`" if code else f"- {v}" for v in values]


def render(d: Digest) -> str:
    """The summary text the simulated model answers a summarization prompt with."""
    lines = ["Handoff summary of the conversation so far."]
    lines += _section("Goals (user requests, oldest first)", d.goals)
    lines += _section("Progress and decisions", d.progress)
    lines += _section("Files mentioned", d.files, code=True)
    lines += _section("Commands run", d.commands, code=True)
    lines += _section("Errors seen", d.errors)
    lines += _section("Next steps", d.next_steps)
    if d.remembered:
        lines += _section(f"Remembered from {max(d.compactions_seen, 1)} earlier compaction(s)", d.remembered)
    return "\n".join(lines)


def summarize(items: list[dict[str, Any]]) -> str:
    """Extract and render in one step."""
    return render(digest(items))
