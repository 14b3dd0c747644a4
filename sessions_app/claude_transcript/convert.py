"""Turning a Claude Code transcript into compactweb rollout lines (issue 35).

compactweb's history is one list folded from append-only lines (`response_item` appends; `compacted` and `rollback`
replace it). A Claude Code transcript is a tree of entries (sessions_app.claude_transcript.parse); its live history
is the main chain from the newest entry back to the root, or to the newest compact boundary. `TranscriptReader`
follows the file in order, line by line (so a follower can feed it what was appended), and writes:

- the conversation of each main-chain `user` / `assistant` entry as Responses items: text → a `message`,
  `tool_use` → `function_call` (its `input` as JSON `arguments`), `tool_result` → `function_call_output`, an image
  → an `input_image` part; `thinking` blocks are not history (Claude Code's own resume leaves them out of the
  request once the turn ended) and stay in the file only;
- a compact boundary followed by its summary (`isCompactSummary`) → one `compacted` line: the summary text as the
  message, the summary message as the new history (then the messages a partial compaction preserved, as Claude
  Code sends them), a new window, `pre_tokens`, and the compaction's labels (trigger
  from `compactMetadata.trigger`: `auto` → auto / context_limit, `manual` → manual / user_requested; Claude Code
  summarises with a model request of its own, so implementation `responses`, strategy `local`);
- an entry whose parent is not the newest main-chain entry (a rewind, an edited prompt: a side branch becomes the
  live one) → a `rollback` line carrying the history of the new branch (`source: "claude_code_branch"`);
- each assistant message's `usage` (once per message id) → an `event_msg` `token_count` line with the server's
  figures (`source: "server"`: Claude models are not counted with tiktoken, compactweb's own counts are estimates);
- each compaction's summary requests → an `event_msg` `compaction_usage` line (`source: "claude_code_cost_state"`,
  the compaction's `window_number`), written at the first `cost-state` line after it: Claude Code writes no entry
  for its summary requests, but its `cost-state` counts every request of the session, so what it counted since the
  previous one beyond the usage of the assistant entries in between is what the compaction's calls spent (split
  evenly when one run compacted more than once);
- sidechain entries (subagents), attachments, other system entries and the bookkeeping lines → nothing: they stay
  in the file (kept verbatim by the importer) and are counted in `kind_counts`.

A hostile file is read in linear time and memory (issue 44). A tree entry whose `uuid` was already read is skipped
(a `LineProblem`): overwriting its parent could close a cycle. A parent is only ever an entry read before (an
unknown one means the live leaf), so the parent links form no cycle whatever the file says. Rebuilding a branch's
history (a rewind) and repeating a partial compaction's preserved messages cost the bytes of the lines they copy;
their total is held to `REBUILD_BYTES_PER_BYTE_READ` times the bytes read plus `REBUILD_BYTES_FREE`, and a rewind
or a preserved list past it is skipped and reported, not copied: a short file cannot make gigabytes of rollback.

Plain Python, no Django.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from compaction_app.providers.anthropic_format import MessagesFormatError, content_items, result_text
from sessions_app.claude_transcript.parse import ASSISTANT, COST_STATE, MANUAL, USER, Entry, parse_line
from sessions_app.codex_rollout.convert import ROLLBACK, ImportedLine
from sessions_app.codex_rollout.labels import LOCAL, Labels
from sessions_app.codex_rollout.parse import (
    COMPACTED,
    EVENT_MSG,
    REPAIRED,
    RESPONSE_ITEM,
    SKIPPED,
    LineProblem,
)
from sessions_app.rollout.projection import COMPACTION_USAGE

BRANCH_SOURCE = "claude_code_branch"
SERVER_USAGE = "server"
COST_STATE_USAGE = "claude_code_cost_state"
FORMAT = "claude_code"
EPOCH = "1970-01-01T00:00:00.000Z"
# A rewind copies the history of the branch it goes back to: real sessions rewind a few times, each copy at most
# the file so far; a file rewinding to a deep entry on every line would copy it quadratically.
REBUILD_BYTES_PER_BYTE_READ = 16
REBUILD_BYTES_FREE = 8 * 1024 * 1024


@dataclass
class Meta:
    """What the session is, from the transcript's first entries."""

    session_id: str | None = None
    started: str | None = None
    cwd: str | None = None
    version: str | None = None
    model: str | None = None

    def session_meta(self) -> dict[str, Any]:
        """A Codex-like `session_meta` payload for the compactweb session."""
        meta: dict[str, Any] = {"id": self.session_id, "source": FORMAT, "model_provider": "anthropic",
                                "format": FORMAT}
        for key, value in (("cwd", self.cwd), ("cli_version", self.version), ("timestamp", self.started),
                           ("model", self.model)):
            if value:
                meta[key] = value
        return meta


@dataclass
class Chunk:
    """What one batch of lines became."""

    lines: list[ImportedLine] = field(default_factory=list)
    labels: dict[int, Labels] = field(default_factory=dict)  # by source line number of the `compacted` line
    kind_counts: Counter[str] = field(default_factory=Counter)
    problems: list[LineProblem] = field(default_factory=list)
    sidechain_entries: int = 0
    branch_switches: int = 0


def entry_items(entry: Entry) -> list[dict[str, Any]]:
    """The Responses items one user or assistant entry adds to the conversation
    (compaction_app.providers.anthropic_format); an entry whose content is malformed adds none."""
    message = entry.message
    role = message.get("role") if message.get("role") in (USER, ASSISTANT) else entry.type
    try:
        return content_items(role, message.get("content"))
    except MessagesFormatError:
        return []


def summary_text(entry: Entry) -> str:
    return result_text(entry.message.get("content"))


def _count(mapping: dict[str, Any], key: str) -> int:
    value = mapping.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def usage_tokens(usage: dict[str, Any]) -> tuple[int, int, int]:
    """(input, cache reads, output) of an Anthropic usage object: input counts what was read from and written to
    the prompt cache too (Anthropic's `input_tokens` leaves them out)."""
    read = _count(usage, "cache_read_input_tokens")
    return (_count(usage, "input_tokens") + _count(usage, "cache_creation_input_tokens") + read, read,
            _count(usage, "output_tokens"))


def cost_state_tokens(data: dict[str, Any]) -> tuple[int, int, int]:
    """(input, cache reads, output) a `cost-state` line counts for the session so far, every model summed."""
    models = data.get("modelUsage")
    totals = [0, 0, 0]
    for usage in models.values() if isinstance(models, dict) else ():
        if isinstance(usage, dict):
            read = _count(usage, "cacheReadInputTokens")
            totals[0] += _count(usage, "inputTokens") + _count(usage, "cacheCreationInputTokens") + read
            totals[1] += read
            totals[2] += _count(usage, "outputTokens")
    return totals[0], totals[1], totals[2]


def usage_payload(usage: dict[str, Any]) -> dict[str, Any] | None:
    """An Anthropic usage object as a `token_count` event (input with the prompt cache's reads and writes)."""
    total_input, read, output = usage_tokens(usage)
    if not (total_input or output):
        return None
    return {"type": "token_count", "source": SERVER_USAGE, "info": {
        "last_token_usage": {"input_tokens": total_input, "cached_input_tokens": read, "output_tokens": output,
                             "reasoning_output_tokens": 0, "total_tokens": total_input + output},
        "model_context_window": None}, "rate_limits": None}


def compaction_usage_payload(window_number: int, tokens: tuple[int, int, int]) -> dict[str, Any]:
    """What one compaction's summary requests spent, as compactweb writes its own compaction's call usage."""
    total_input, read, output = tokens
    return {"type": COMPACTION_USAGE, "source": COST_STATE_USAGE, "window_number": window_number,
            "implementation": "responses", "info": {"last_token_usage": {
                "input_tokens": total_input, "cached_input_tokens": read, "output_tokens": output,
                "reasoning_output_tokens": 0, "total_tokens": total_input + output}}}


def _shares(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if n < total % parts else 0) for n in range(parts)]


def _labels(boundary: Entry | None, *, mid_turn: bool) -> Labels:
    trigger = boundary.compact_trigger if boundary is not None else "auto"
    evidence = {"implementation": "Claude Code summarises with a model request of its own: a local summary",
                "trigger": (f"compact boundary trigger {trigger!r}" if boundary is not None
                            else "a summary without a compact boundary: taken as auto")}
    if trigger == MANUAL:
        phase, reason = "standalone_turn", "user_requested"
        evidence["phase"] = "/compact is a command of its own"
    else:
        phase, reason = ("mid_turn", "context_limit") if mid_turn else ("pre_turn", "context_limit")
        evidence["phase"] = ("the entry before the boundary was a tool call or its result: inside a turn" if mid_turn
                             else "the entry before the boundary ended a turn")
    if boundary is not None and boundary.pre_tokens is not None:
        evidence["pre_tokens"] = f"Claude Code counted {boundary.pre_tokens:,} tokens before compacting"
    return Labels(implementation=LOCAL[0], strategy=LOCAL[1], phase=phase, trigger=trigger, reason=reason,
                  inferred=evidence)


class TranscriptReader:
    """Follows one transcript, line by line or batch by batch, and remembers the tree so later lines (a follower's)
    are placed right. Memory: every main-chain entry's items (to rebuild a branch's history)."""

    def __init__(self) -> None:
        self.meta = Meta()
        self.history: list[dict[str, Any]] = []
        self.leaf: str | None = None
        self._parent: dict[str, str | None] = {}
        self._weight: dict[str, int] = {}  # the bytes of each main-chain entry's line: what copying its items costs
        self._bytes_read = 0
        self._bytes_rebuilt = 0
        self._items: dict[str, list[dict[str, Any]]] = {}
        self._replaces: set[str] = set()  # entries whose items replace the history (compact summaries)
        self._boundary: Entry | None = None  # a compact boundary waiting for its summary
        self._usage_ids: set[str] = set()
        self._last_timestamp: str | None = None
        self._window_number = 0
        self._window_id: str | None = None
        self._mid_turn = False
        # The first real prompt (its first 80 characters), what the session is titled after: the importer says
        # "imported:" or "followed:" before it (sessions_app.transfer.importer.titled).
        self.first_prompt: str | None = None
        # Since the last `cost-state`: its figures, the usage of the assistant messages read (each message once,
        # subagents' too: Claude Code counts them) and the compactions (window numbers) whose calls are not counted.
        self._cost_seen = (0, 0, 0)
        self._usage_since_cost = [0, 0, 0]
        self._costed_ids: set[str] = set()
        self._uncosted: list[int] = []

    @property
    def first_window_id(self) -> str:
        return self.meta.session_id or ""

    def feed(self, raw_lines, *, first_line_no: int) -> Chunk:
        chunk = Chunk()
        for line_no, raw in enumerate(raw_lines, start=first_line_no):
            self._bytes_read += len(raw)
            parsed = parse_line(raw, line_no)
            if parsed is None:
                continue
            if isinstance(parsed, LineProblem):
                chunk.problems.append(parsed)
                continue
            chunk.kind_counts[parsed.type] += 1
            if parsed.repair:
                chunk.problems.append(LineProblem(line_no, parsed.repair, REPAIRED))
            self._entry(parsed, chunk, weight=len(raw))
        return chunk

    # -- one entry -----------------------------------------------------------------------------------------------

    def _timestamp(self, entry: Entry) -> str:
        stamp = entry.timestamp or self._last_timestamp or EPOCH
        self._last_timestamp = stamp
        return stamp

    def _note_meta(self, entry: Entry) -> None:
        data = entry.data
        meta = self.meta
        if meta.session_id is None and isinstance(data.get("sessionId"), str):
            meta.session_id = data["sessionId"]
        if meta.started is None and entry.timestamp:
            meta.started = entry.timestamp
        if meta.cwd is None and isinstance(data.get("cwd"), str):
            meta.cwd = data["cwd"]
        if meta.version is None and isinstance(data.get("version"), str):
            meta.version = data["version"]
        if meta.model is None and entry.type == ASSISTANT and isinstance(entry.message.get("model"), str):
            meta.model = entry.message["model"]

    def _budget(self) -> int:
        return REBUILD_BYTES_PER_BYTE_READ * self._bytes_read + REBUILD_BYTES_FREE

    def _budget_left(self) -> int:
        return self._budget() - self._bytes_rebuilt

    def _afford(self, cost: int) -> bool:
        """Whether copying `cost` more bytes of history keeps the total linear in the bytes read; spent if so."""
        if cost > self._budget_left():
            return False
        self._bytes_rebuilt += cost
        return True

    def _account(self, entry: Entry) -> None:
        """Add an assistant message's usage (once per message id) to what the next `cost-state` explains."""
        message = entry.message
        message_id = message.get("id") if isinstance(message.get("id"), str) else f"line-{entry.line_no}"
        usage = message.get("usage")
        if isinstance(usage, dict) and message_id not in self._costed_ids:
            self._costed_ids.add(message_id)
            for n, value in enumerate(usage_tokens(usage)):
                self._usage_since_cost[n] += value

    def _cost_state(self, entry: Entry, chunk: Chunk, stamp: str) -> None:
        """The compactions since the previous `cost-state` spent what it counted beyond the messages read."""
        counted = cost_state_tokens(entry.data)
        if any(now < before for now, before in zip(counted, self._cost_seen, strict=True)):
            self._cost_seen = (0, 0, 0)  # counted afresh (a new process that did not carry the figures over)
        spent = [max(0, now - before - read) for now, before, read in
                 zip(counted, self._cost_seen, self._usage_since_cost, strict=True)]
        self._cost_seen, self._usage_since_cost = counted, [0, 0, 0]
        pending, self._uncosted = self._uncosted, []
        if not pending:
            return
        shares = [_shares(value, len(pending)) for value in spent]
        for n, window_number in enumerate(pending):
            tokens = (shares[0][n], min(shares[1][n], shares[0][n]), shares[2][n])
            chunk.lines.append(ImportedLine(EVENT_MSG, compaction_usage_payload(window_number, tokens), stamp,
                                            entry.line_no))

    def _entry(self, entry: Entry, chunk: Chunk, *, weight: int) -> None:
        self._note_meta(entry)
        if entry.type == ASSISTANT:
            self._account(entry)
        if entry.type == COST_STATE:
            self._cost_state(entry, chunk, entry.timestamp or self._last_timestamp or EPOCH)
            return
        if not entry.in_tree:
            return
        if entry.sidechain:
            chunk.sidechain_entries += 1
            return
        uuid, parent = entry.uuid, entry.parent
        if uuid in self._parent:
            chunk.problems.append(LineProblem(
                entry.line_no, f"uuid {uuid[:60]!r} was already used by an earlier entry: an entry is written once",
                SKIPPED))
            return
        stamp = self._timestamp(entry)
        self._weight[uuid] = weight
        if entry.is_compact_boundary:
            self._boundary = entry
            self._parent[uuid] = None
            self._items[uuid] = []
            self.leaf = uuid
            return
        if parent != self.leaf and not (parent is not None and parent not in self._parent):
            branch = self._history_at(parent)
            if branch is None:
                del self._weight[uuid]
                chunk.problems.append(LineProblem(
                    entry.line_no, f"this entry goes back to the branch at {parent[:60]!r}, and the transcript has "
                    "rebuilt more history for its rewinds than its size allows: skipped", SKIPPED))
                return
            if branch != self.history:
                chunk.branch_switches += 1
                chunk.lines.append(ImportedLine(ROLLBACK, {"replacement_history": list(branch),
                                                           "source": BRANCH_SOURCE, "to_uuid": parent},
                                                stamp, entry.line_no))
            self.history = list(branch)
            self._boundary = None
        items = entry_items(entry) if entry.type in (USER, ASSISTANT) else []
        self._parent[uuid] = parent if parent in self._parent else self.leaf
        self.leaf = uuid
        if entry.is_compact_summary:
            kept, cost = self._preserved(entry, chunk)
            self._weight[uuid] += cost  # a rewind to here copies the preserved messages again
            self._compacted(entry, items + kept, stamp, chunk)
            return
        if self._boundary is not None and entry.type in (USER, ASSISTANT):
            # A boundary with no summary after it: the history still starts over there.
            self._compacted(None, [], stamp, chunk, message="")
        self._items[uuid] = items
        for item in items:
            chunk.lines.append(ImportedLine(RESPONSE_ITEM, item, stamp, entry.line_no))
        self.history.extend(items)
        if entry.type in (USER, ASSISTANT):
            self._mid_turn = any(i["type"] in ("function_call", "function_call_output") for i in items) or (
                self._mid_turn and not items)
            if self.first_prompt is None and entry.type == USER and not entry.data.get("isMeta"):
                text = " ".join(" ".join(str(p.get("text", "")) for i in items if i["type"] == "message"
                                         for p in i["content"]).split())
                if text:
                    self.first_prompt = text[:80]
        if entry.type == ASSISTANT:
            message = entry.message
            message_id = message.get("id") if isinstance(message.get("id"), str) else f"line-{entry.line_no}"
            usage = message.get("usage")
            if isinstance(usage, dict) and message_id not in self._usage_ids:
                payload = usage_payload(usage)
                if payload is not None:
                    self._usage_ids.add(message_id)
                    chunk.lines.append(ImportedLine(EVENT_MSG, payload, stamp, entry.line_no))

    def _compacted(self, summary: Entry | None, items: list[dict[str, Any]], stamp: str, chunk: Chunk, *,
                   message: str | None = None) -> None:
        boundary = self._boundary
        self._boundary = None
        previous = self._window_id or self.first_window_id
        self._window_number += 1
        self._window_id = (boundary.uuid if boundary is not None else None) or (summary.uuid if summary else "")
        payload: dict[str, Any] = {
            "message": summary_text(summary) if message is None and summary is not None else (message or ""),
            "replacement_history": list(items),
            "window_number": self._window_number, "window_id": self._window_id,
            "previous_window_id": previous, "first_window_id": self.first_window_id,
        }
        if boundary is not None and boundary.pre_tokens is not None:
            payload["pre_tokens"] = boundary.pre_tokens
        line_no = summary.line_no if summary is not None else (boundary.line_no if boundary else 0)
        chunk.lines.append(ImportedLine(COMPACTED, payload, stamp, line_no))
        chunk.labels[line_no] = _labels(boundary, mid_turn=self._mid_turn)
        self._uncosted.append(self._window_number)
        self._mid_turn = False
        if summary is not None and summary.uuid:
            self._items[summary.uuid] = list(items)
            self._replaces.add(summary.uuid)
        self.history = list(items)

    def _preserved(self, summary: Entry, chunk: Chunk) -> tuple[list[dict[str, Any]], int]:
        """The items of the messages the waiting boundary's partial compaction kept, each message once, and what
        copying them cost; none (and a problem) when that would pass the rebuild limit."""
        uuids = [u for u in dict.fromkeys(self._boundary.preserved_uuids if self._boundary else [])
                 if u in self._items]
        cost = sum(self._weight.get(u, 0) for u in uuids)
        if not self._afford(cost):
            chunk.problems.append(LineProblem(
                summary.line_no, "the compaction's preserved messages would rebuild more history than the "
                "transcript's size allows: the summary is kept without them", REPAIRED))
            return [], 0
        return [i for u in uuids for i in self._items[u]], cost

    def _history_at(self, uuid: str | None) -> list[dict[str, Any]] | None:
        """The history of the main chain ending at `uuid` (empty for none), rebuilt from the remembered tree; None
        when rebuilding it would pass the rebuild limit (nothing is copied then)."""
        path: list[str] = []
        left = self._budget_left()
        while uuid is not None:
            path.append(uuid)
            # The walk is spent as it goes, refused or not: a refused rewind stops at once, never walks the tree.
            left -= self._weight.get(uuid, 0)
            if left < 0:
                self._bytes_rebuilt = self._budget()
                return None
            if uuid in self._replaces:
                break
            uuid = self._parent.get(uuid)
        self._bytes_rebuilt = self._budget() - left
        history: list[dict[str, Any]] = []
        for node in reversed(path):
            history.extend(self._items.get(node, []))
        return history
