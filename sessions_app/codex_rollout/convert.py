"""Turning a parsed Codex rollout into compactweb rollout lines (spec §8.2, §8.3, §15).

compactweb projects its live history with one simple fold: `response_item` appends, and any line whose payload
carries a `replacement_history` list (`compacted`, `rollback`, `redo`) replaces the history. Codex lines that
change history in other ways are made explicit here so that fold gives the same history as
`reconstruct_history`:

- a legacy `compacted` line without `replacement_history` gets the history Codex would rebuild at that point,
  and is marked `"legacy_rebuilt": true`;
- an `event_msg` `thread_rolled_back` becomes a `rollback` line carrying the history after the rollback
  (`"source": "codex_thread_rolled_back"`, plus `"reference_context_set": false` when the cut trimmed a developer
  message mixing injected and persistent text); the event itself is not kept, so an export never applies it twice.

`turn_context` and other `event_msg` lines are kept (they do not change history); `session_meta` is available as
`ParsedRollout.session_meta`; newer recognised kinds (`world_state`, ...) and unknown kinds are dropped, and are
counted in `ParsedRollout.kind_counts` / `skipped_kinds`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compaction_app.engine.items import Item
from sessions_app.codex_rollout.parse import (
    COMPACTED,
    EVENT_MSG,
    RESPONSE_ITEM,
    THREAD_ROLLED_BACK,
    TURN_CONTEXT,
    ParsedRollout,
)
from sessions_app.codex_rollout.reconstruct import replay_line
from sessions_app.codex_rollout.turn_rollback import drop_last_user_turns

ROLLBACK = "rollback"
ROLLBACK_SOURCE = "codex_thread_rolled_back"
IMPORTED_KINDS = frozenset({RESPONSE_ITEM, COMPACTED, TURN_CONTEXT, EVENT_MSG, ROLLBACK})


@dataclass(frozen=True)
class ImportedLine:
    """One compactweb rollout line to append: `kind` in IMPORTED_KINDS, the Codex timestamp kept as is."""

    kind: str
    payload: dict[str, Any]
    timestamp: str
    source_line_no: int


def to_compactweb_lines(parsed: ParsedRollout, *, history: list[Item] | None = None) -> list[ImportedLine]:
    """Map Codex lines to compactweb lines whose simple fold equals `reconstruct_history` (spec §8.2, §8.3).
    `history` is the history before these lines (a follower appending to a session), empty by default."""
    out, _ = convert_lines(parsed.lines, history=list(history or []))
    return out


def needs_history(lines) -> bool:
    """Whether `convert_lines` needs the history before `lines`: only a thread rollback (its replacement history)
    and a compacted line without one (rebuilt) read it; every other line converts the same without it."""
    return any((line.kind == EVENT_MSG and line.payload["type"] == THREAD_ROLLED_BACK)
               or (line.kind == COMPACTED and line.payload.get("replacement_history") is None) for line in lines)


def convert_lines(lines, *, history: list[Item]) -> tuple[list[ImportedLine], list[Item]]:
    """`to_compactweb_lines` for one chunk of a big file: the history before the chunk in, after it out."""
    out: list[ImportedLine] = []
    for line in lines:
        if line.kind not in (RESPONSE_ITEM, COMPACTED, EVENT_MSG, TURN_CONTEXT):
            continue
        kind, payload = line.kind, line.payload
        if kind == EVENT_MSG and payload["type"] == THREAD_ROLLED_BACK:
            rollback = drop_last_user_turns(history, payload["num_turns"])
            history = rollback.history
            kind = ROLLBACK
            payload = {"num_turns": payload["num_turns"], "replacement_history": list(history), "source": ROLLBACK_SOURCE}
            if rollback.clears_baseline:
                # A trimmed developer bundle held persistent text: the next turn must re-inject full context.
                payload["reference_context_set"] = False
        else:
            history, _ = replay_line(history, line)
            if kind == COMPACTED and payload.get("replacement_history") is None:
                payload = {**payload, "replacement_history": list(history), "legacy_rebuilt": True}
        out.append(ImportedLine(kind=kind, payload=payload, timestamp=line.timestamp, source_line_no=line.line_no))
    return out, history
