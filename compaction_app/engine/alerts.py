"""Storm, loop, re-read and failure-streak detection, incremental so a turn costs O(1) whatever the history.

A session's `Watch` is a small state carried from turn to turn: the turns since its last compaction, the tool calls
that compaction dropped (keys of what a re-fetch would look like) with the turns left to watch them, the re-read tax
counted so far, and the current streak of failed attempts. The Django side stores it as JSON on the session's watch
row, feeds it one compaction, one finished turn or one failed attempt at a time, and records the alerts returned.
Storms are counted on each compaction from the compaction times (an indexed query), never per turn.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from compaction_app.engine.items import TOOL_CALL_KINDS, TOOL_OUTPUT_KINDS, Item
from compaction_app.engine.retention.facts import (
    PATCH_TOOLS,
    READ_PROGRAMS,
    SHELL_TOOLS,
    arguments,
    command_of,
    command_reads,
    output_text,
    read_path,
)


class AlertKind(StrEnum):
    STORM = "storm"                    # > N compactions in M minutes in one session
    FLEET_STORM = "fleet_storm"        # > N compactions in M minutes across the fleet
    LOOP = "loop"                      # usage back above the limit within K turns of a compaction
    REREAD = "reread"                  # compact-forget-re-read: dropped files fetched again soon after
    FAILURE_STREAK = "failure_streak"  # N failed attempts in a row


@dataclass(frozen=True)
class Thresholds:
    storm_count: int = 3
    storm_minutes: int = 10
    fleet_storm_count: int = 30
    fleet_storm_minutes: int = 10
    # A fleet storm's threshold grows with the fleet: more than this many compactions per active session.
    fleet_storm_per_session: float = 1.5
    loop_turns: int = 2
    reread_turns: int = 5
    reread_min_calls: int = 2
    # ...and only when the re-fetched tokens reach this share of what the compaction freed: a few re-reads that
    # cost little of the saving are the normal price of a compaction, not a fault to act on.
    reread_min_share: float = 0.25
    failure_streak: int = 3
    pause_on: frozenset[str] = frozenset()

    def pauses(self, kind: AlertKind) -> bool:
        return kind.value in self.pause_on

    def fleet_storm_threshold(self, active_sessions: int) -> int:
        """The fleet storm threshold for a fleet of `active_sessions`: the configured floor, or more compactions
        per active session than a busy normal session makes in the window, whichever is higher."""
        return max(self.fleet_storm_count, math.ceil(self.fleet_storm_per_session * active_sessions))


@dataclass(frozen=True)
class Alert:
    kind: AlertKind
    message: str
    compaction_ids: tuple[int, ...] = ()
    attempt_ids: tuple[int, ...] = ()
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class Watch:
    """The per-session state (JSON-ready)."""

    compaction_id: int | None = None
    after_seq: int = 0  # the rollout seq of that compaction: a turn's items before it belong to the old window
    turns_since: int = 0
    limit_after: int | None = None
    dropped: dict[str, str] = field(default_factory=dict)  # fetch key -> label (path or call)
    digests: dict[str, str] = field(default_factory=dict)  # fetch key -> digest of the output that was dropped
    freed: int = 0  # tokens the compaction freed (the re-read alert's yardstick)
    turns_left: int = 0
    reread_calls: int = 0
    reread_tokens: int = 0
    reread_labels: list[str] = field(default_factory=list)
    reread_alerted: bool = False
    loop_alerted: bool = False
    loop_checked: bool = False  # the loop window (loop_turns turns) has passed
    failures: list[int] = field(default_factory=list)  # the streak's last attempts (at most the threshold's number)
    # The streak's whole length: `failures` is bounded, and the open alert's message says how many failed so far.
    failed_in_row: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Watch:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in (data or {}).items() if k in known})


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]


def fetch_key(call: Item) -> str | None:
    """What re-fetching this call's content looks like: `read:<path>` for a file read (a read tool, or a shell
    command made only of reading programs: `cat a.py`, `sed -n 1,80p a.py`), `call:<tool>:<args>` for another
    tool that fetches (not a shell command that does work, not a patch): re-running tests or re-applying a patch is
    not re-reading what a compaction dropped."""
    if call.get("type") not in TOOL_CALL_KINDS:
        return None
    path = read_path(call)
    if path:
        return f"read:{path}"
    command = command_of(call)
    if command is not None:
        steps = [s.split() for s in command.replace("&&", "|").replace(";", "|").split("|") if s.strip()]
        if steps and all(s[0].rsplit("/", 1)[-1] in READ_PROGRAMS for s in steps) and command_reads(command):
            return f"read:{command}"
        return None
    if call.get("type") != "function_call" or call.get("name") in PATCH_TOOLS | SHELL_TOOLS:
        return None
    return f"call:{call.get('name')}:{json.dumps(arguments(call), sort_keys=True)}"


def dropped_fetches(left: list[Item], masked_call_ids: set[str] | None = None,
                    history: list[Item] | None = None, before: list[Item] | None = None) -> dict[str, str]:
    """Fetch keys of the calls whose output the compaction removed: calls that left the window, and calls still
    in it whose output was masked."""
    return {key: label for key, (label, _) in dropped_contents(left, masked_call_ids, history, before).items()}


def dropped_contents(left: list[Item], masked_call_ids: set[str] | None = None,
                     history: list[Item] | None = None,
                     before: list[Item] | None = None) -> dict[str, tuple[str, str]]:
    """Fetch key -> (label, digest of the dropped output; "" when unknown) of what the compaction removed."""
    calls = [i for i in left if i.get("type") in TOOL_CALL_KINDS]
    if masked_call_ids and history:
        calls += [i for i in history if i.get("type") in TOOL_CALL_KINDS and i.get("call_id") in masked_call_ids]
    outputs = {i.get("call_id"): i for i in [*(before or []), *left] if i.get("type") in TOOL_OUTPUT_KINDS}
    found: dict[str, tuple[str, str]] = {}
    for call in calls:
        key = fetch_key(call)
        if key:
            output = outputs.get(call.get("call_id"))
            found[key] = (read_path(call) or command_of(call) or str(call.get("name")),
                          digest(output_text(output)) if output is not None else "")
    return found


def on_compaction(watch: Watch, *, compaction_id: int, dropped: dict[str, str], thresholds: Thresholds,
                  after_seq: int = 0, digests: dict[str, str] | None = None, freed: int = 0) -> Watch:
    """Start watching after a compaction (the previous compaction's watch ends here). `digests` (fetch key ->
    digest of the dropped output) makes only an unchanged re-fetch a re-read."""
    return Watch(compaction_id=compaction_id, after_seq=after_seq, turns_since=0, dropped=dict(dropped),
                 digests=dict(digests or {}), turns_left=thresholds.reread_turns, failures=[], freed=max(0, freed))


def is_idle(watch: Watch) -> bool:
    """Nothing left to watch: a turn can skip reading its items."""
    return watch.compaction_id is None or (watch.turns_left <= 0 and (watch.loop_alerted or watch.loop_checked))


def on_turn(watch: Watch, *, items: list[Item], item_tokens: list[int], tokens_in_window: int,
            limit: int | None, thresholds: Thresholds) -> tuple[Watch, list[Alert]]:
    """Feed one finished turn (only the items that turn appended). Returns the new watch and any alerts."""
    alerts: list[Alert] = []
    if watch.compaction_id is None:
        return watch, alerts
    watch.turns_since += 1
    ids = (watch.compaction_id,)
    if (limit is not None and not watch.loop_alerted and watch.turns_since <= thresholds.loop_turns
            and tokens_in_window >= limit):
        watch.loop_alerted = True
        alerts.append(Alert(
            kind=AlertKind.LOOP, compaction_ids=ids,
            message=f"usage is back above the limit ({tokens_in_window:,} ≥ {limit:,} tokens) {watch.turns_since} "
                    f"turn(s) after compaction #{watch.compaction_id}",
            detail={"tokens": tokens_in_window, "limit": limit, "turns": watch.turns_since},
        ))
    if watch.turns_since >= thresholds.loop_turns:
        watch.loop_checked = True
    if watch.turns_left > 0 and watch.dropped:
        outputs = {i.get("call_id"): n for i, n in zip(items, item_tokens, strict=False)
                   if i.get("type") in TOOL_OUTPUT_KINDS}
        texts = {i.get("call_id"): output_text(i) for i in items if i.get("type") in TOOL_OUTPUT_KINDS}
        for item in items:
            key = fetch_key(item)
            if key and key in watch.dropped:
                known = watch.digests.get(key)
                text = texts.get(item.get("call_id"))
                if known and text is not None and digest(text) != known:
                    continue  # the content changed since: fetching it again is not forgetting
                watch.reread_calls += 1
                watch.reread_tokens += outputs.get(item.get("call_id"), 0)
                if watch.dropped[key] not in watch.reread_labels:
                    watch.reread_labels.append(watch.dropped[key])
        watch.turns_left -= 1
        if (not watch.reread_alerted and watch.reread_calls >= thresholds.reread_min_calls
                and watch.reread_tokens >= thresholds.reread_min_share * watch.freed):
            watch.reread_alerted = True
            alerts.append(Alert(
                kind=AlertKind.REREAD, compaction_ids=ids,
                message=f"compact-forget-re-read: {watch.reread_calls} call(s) re-fetched what compaction "
                        f"#{watch.compaction_id} dropped ({', '.join(watch.reread_labels[:5])}), "
                        f"{watch.reread_tokens:,} tokens of the {watch.freed:,} it freed",
                detail={"calls": watch.reread_calls, "tokens": watch.reread_tokens,
                        "labels": watch.reread_labels[:20]},
            ))
    return watch, alerts


def on_attempt(watch: Watch, *, attempt_id: int, failed: bool, thresholds: Thresholds) -> tuple[Watch, list[Alert]]:
    """Feed one finished compaction attempt; a success ends the streak."""
    if not failed:
        watch.failures = []
        watch.failed_in_row = 0
        return watch, []
    watch.failures = [*watch.failures, attempt_id][-max(thresholds.failure_streak, 1):]
    # A watch saved before the whole length was kept knows at least its bounded list.
    watch.failed_in_row = max(watch.failed_in_row, len(watch.failures) - 1) + 1
    if len(watch.failures) == thresholds.failure_streak:
        # Every failure past the threshold raises again: the open alert's message is rewritten with the streak's
        # length so far (issue 46: a message that kept its first count beside a growing badge).
        return watch, [Alert(
            kind=AlertKind.FAILURE_STREAK, attempt_ids=tuple(watch.failures),
            message=f"{watch.failed_in_row:,} compaction attempts failed in a row",
            detail={"count": watch.failed_in_row, "threshold": thresholds.failure_streak},
        )]
    return watch, []


def storm(*, compaction_ids: list[int], count: int, minutes: int, fleet: bool = False,
          total: int | None = None) -> Alert | None:
    """An alert when more than `count` compactions (ids of those within the last `minutes`) happened. `total` is
    how many there were when the caller linked only the first of them (the message states the full count)."""
    total = len(compaction_ids) if total is None else max(total, len(compaction_ids))
    if total <= count:
        return None
    where = "across the fleet" if fleet else "in this session"
    return Alert(
        kind=AlertKind.FLEET_STORM if fleet else AlertKind.STORM, compaction_ids=tuple(compaction_ids),
        message=f"compaction storm: {total:,} compactions in {minutes} minutes {where} (threshold {count:,})",
        detail={"count": total, "minutes": minutes},
    )
