"""Reading Claude Code transcripts (issue 35): the JSON Lines file Claude Code writes per session under
`~/.claude/projects/<escaped working directory>/<session id>.jsonl`.

Every line is one JSON object with a `type`. The conversation entries carry `uuid` and `parentUuid` (the parent
links make the conversation a tree: a rewind or an edited prompt starts a side branch, a subagent's entries are a
`isSidechain` chain of their own) and a `sessionId`:

- `user`: `message.content` is a string or blocks (`text`, `tool_result`, `image`); `isCompactSummary: true`
  marks the summary Claude Code writes after a compaction, `isMeta: true` text Claude Code injected itself;
- `assistant`: `message` is the API's answer (`id`, `model`, `content` blocks `text` / `tool_use` / `thinking`,
  `usage`); Claude Code may write one entry per content block, each with the message's usage;
- `system` with `subtype: "compact_boundary"`: a compaction. `compactMetadata` holds `trigger` (`auto` or
  `manual`, the `/compact` command) and `preTokens`; its `parentUuid` is null (the summarised history is cut off)
  and `logicalParentUuid` names the entry it followed. A partial compaction keeps the newest messages:
  `compactMetadata.preservedMessages.uuids` lists them, and Claude Code sends them right after the summary;
- `attachment` (context Claude Code renders into the next request as `<system-reminder>` text) and other
  `system` entries are part of the tree but not of the conversation;
- everything else (`summary`, `queue-operation`, `last-prompt`, `api-request`, `cost-state`, `file-history-snapshot`,
  ...) is bookkeeping outside the tree.

This module reads lines into `Entry` values, tolerantly (a line that is not a JSON object, or JSON no database
stores (`codex_rollout.storable`), is a `LineProblem`, skipped; NUL characters are removed, a repair); `convert` turns them into compactweb lines. Plain Python, no Django.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sessions_app.codex_rollout import storable
from sessions_app.codex_rollout.parse import SKIPPED, LineProblem, json_error, strip_nul

USER = "user"
ASSISTANT = "assistant"
SYSTEM = "system"
ATTACHMENT = "attachment"
COMPACT_BOUNDARY = "compact_boundary"
MICROCOMPACT_BOUNDARY = "microcompact_boundary"
CONVERSATION_TYPES = frozenset({USER, ASSISTANT})
TREE_TYPES = frozenset({USER, ASSISTANT, SYSTEM, ATTACHMENT})
AUTO, MANUAL = "auto", "manual"
# Bookkeeping Claude Code writes at the end of every run: the session's model usage so far, every request counted
# (its compaction's summary requests too, which the transcript has no entry for).
COST_STATE = "cost-state"


@dataclass(frozen=True)
class Entry:
    """One transcript line that parsed: `data` is the object as read (NUL characters removed)."""

    line_no: int
    data: dict[str, Any]
    repair: str | None = None  # what was changed to store it (NUL characters removed)

    @property
    def type(self) -> str:
        return str(self.data.get("type") or "")

    @property
    def uuid(self) -> str | None:
        value = self.data.get("uuid")
        return value if isinstance(value, str) and value else None

    @property
    def parent(self) -> str | None:
        value = self.data.get("parentUuid")
        return value if isinstance(value, str) and value else None

    @property
    def in_tree(self) -> bool:
        return self.type in TREE_TYPES and self.uuid is not None

    @property
    def sidechain(self) -> bool:
        return self.data.get("isSidechain") is True

    @property
    def timestamp(self) -> str | None:
        value = self.data.get("timestamp")
        return value if isinstance(value, str) else None

    @property
    def message(self) -> dict[str, Any]:
        value = self.data.get("message")
        return value if isinstance(value, dict) else {}

    @property
    def is_compact_boundary(self) -> bool:
        return self.type == SYSTEM and self.data.get("subtype") == COMPACT_BOUNDARY

    @property
    def is_compact_summary(self) -> bool:
        return self.type == USER and self.data.get("isCompactSummary") is True

    @property
    def compact_trigger(self) -> str:
        metadata = self.data.get("compactMetadata")
        trigger = metadata.get("trigger") if isinstance(metadata, dict) else None
        return trigger if trigger in (AUTO, MANUAL) else AUTO

    @property
    def preserved_uuids(self) -> list[str]:
        """A partial compaction keeps the newest messages verbatim after the summary: their uuids, in order."""
        metadata = self.data.get("compactMetadata")
        preserved = metadata.get("preservedMessages") if isinstance(metadata, dict) else None
        uuids = preserved.get("uuids") if isinstance(preserved, dict) else None
        return [u for u in uuids if isinstance(u, str)] if isinstance(uuids, list) else []

    @property
    def pre_tokens(self) -> int | None:
        metadata = self.data.get("compactMetadata")
        value = metadata.get("preTokens") if isinstance(metadata, dict) else None
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


# `<session id>.jsonl` directly in a project folder; a subagent's own file (`<session>/subagents/agent-*.jsonl`)
# is not a session of its own.
TRANSCRIPT_NAME = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.jsonl$")


def is_transcript_file(path: Path) -> bool:
    """Claude Code's own transcript names (a session id), as found under `~/.claude/projects/<project>/`."""
    return bool(TRANSCRIPT_NAME.match(path.name))


def is_claude_transcript_line(text: str) -> bool:
    """Whether one line looks like Claude Code's (a `sessionId`, or a tree entry's `uuid`), not a Codex rollout line
    (`payload`). Used to tell the formats apart on import."""
    try:
        obj = json.loads(text)
    except ValueError:
        return False
    if not isinstance(obj, dict) or "payload" in obj:
        return False
    return isinstance(obj.get("sessionId"), str) or (
        obj.get("type") in TREE_TYPES and isinstance(obj.get("uuid"), str)) or (
        obj.get("type") == "summary" and "leafUuid" in obj)


def looks_like_claude_transcript(lines) -> bool:
    """The first non-blank line decides (a file's first lines are enough: both formats are uniform)."""
    for raw in lines:
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        if text.strip():
            return is_claude_transcript_line(text)
    return False


def parse_line(raw: str | bytes, line_no: int) -> Entry | LineProblem | None:
    """An Entry, a LineProblem (skipped), or None for a blank line."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return LineProblem(line_no, f"not valid UTF-8 ({exc.reason} at byte {exc.start})", SKIPPED)
    raw = raw.rstrip("\r\n")
    if not raw.strip():
        return None
    try:
        obj, nul = storable.loads(raw)
    except json.JSONDecodeError as exc:
        return LineProblem(line_no, json_error(exc, raw), SKIPPED)
    except storable.Unstorable as exc:
        return LineProblem(line_no, str(exc), SKIPPED)
    if not isinstance(obj, dict):
        return LineProblem(line_no, "a transcript line must be a JSON object", SKIPPED)
    if not isinstance(obj.get("type"), str) or not obj["type"]:
        return LineProblem(line_no, "missing string `type`", SKIPPED)
    if nul:
        # PostgreSQL's jsonb cannot hold U+0000: removed and reported (a strict import refuses the line).
        obj, _ = strip_nul(obj)
        return Entry(line_no=line_no, data=obj,
                     repair=f"{nul} NUL character{'s' if nul > 1 else ''} removed from the text")
    return Entry(line_no=line_no, data=obj)
