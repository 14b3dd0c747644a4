"""Rebuilding the live history and resume metadata from a parsed Codex rollout (spec §8.2).

Two passes, as Codex does. A reverse scan groups lines into turn segments (a segment closes at its turn-started
event) and, honouring pending `thread_rolled_back` counts, finds the newest surviving `compacted` line with a
replacement history (the base) and the resume metadata. A forward replay from that base then materialises the
history.

One deliberate difference: Codex moves its replay start to any compaction it meets in the reverse scan, even
one whose segment a rollback then skips, so a rollback reaching back past a compaction replays from the wrong
place. Here the replay starts after the base actually chosen (spec §8.2 "only rollout lines after it are
replayed"), which always equals a full forward fold of the rollout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compaction_app.engine.history import build_compacted_history, collect_user_messages
from compaction_app.engine.items import Item, is_user_turn_boundary
from sessions_app.codex_rollout.parse import (
    COMPACTED,
    EVENT_MSG,
    RESPONSE_ITEM,
    THREAD_ROLLED_BACK,
    TURN_ABORTED,
    TURN_COMPLETE_TYPES,
    TURN_CONTEXT,
    TURN_STARTED_TYPES,
    USER_MESSAGE,
    ParsedRollout,
    RolloutLine,
)
from sessions_app.codex_rollout.turn_rollback import drop_last_user_turns

_NEVER_SET = "never_set"
_CLEARED = "cleared"


@dataclass(frozen=True)
class Reconstruction:
    """What a resume restores (spec §8.2): the history, the window of the newest surviving CompactedItem (or
    the number of compacted lines when none carries a window number), the previous turn settings, the reference
    context item (None when a surviving compaction cleared it), and the index in `parsed.lines` of the base."""

    history: list[Item]
    window_number: int
    window_id: str | None = None
    previous_window_id: str | None = None
    first_window_id: str | None = None
    previous_turn_settings: dict[str, Any] | None = None
    reference_context_item: dict[str, Any] | None = None
    base_seq_index: int | None = None
    replayed_from: int = 0
    legacy_compactions_rebuilt: int = 0

    @property
    def has_previous_turn_settings(self) -> bool:
        return self.previous_turn_settings is not None

    @property
    def has_reference_context_item(self) -> bool:
        return self.reference_context_item is not None


@dataclass
class _Segment:
    turn_id: str | None = None
    counts_as_user_turn: bool = False
    previous_turn_settings: dict[str, Any] | None = None
    reference: Any = _NEVER_SET
    base_index: int | None = None
    window: dict[str, Any] | None = None


@dataclass
class _Scan:
    pending_rollback: int = 0
    base_index: int | None = None
    previous_turn_settings: dict[str, Any] | None = None
    reference: Any = _NEVER_SET
    window: dict[str, Any] | None = None
    active: _Segment | None = None

    def segment(self) -> _Segment:
        if self.active is None:
            self.active = _Segment()
        return self.active

    def finalise(self) -> None:
        seg, self.active = self.active, None
        if seg is None:
            return
        if self.pending_rollback > 0:
            # A rolled-back segment contributes nothing; only user turns pay off the pending count.
            if seg.counts_as_user_turn:
                self.pending_rollback -= 1
            return
        if self.base_index is None and seg.base_index is not None:
            self.base_index = seg.base_index
        if self.window is None:
            self.window = seg.window
        if self.previous_turn_settings is None and seg.counts_as_user_turn:
            self.previous_turn_settings = seg.previous_turn_settings
        if self.reference == _NEVER_SET and (seg.counts_as_user_turn or seg.reference == _CLEARED):
            self.reference = seg.reference

    def done(self) -> bool:
        return (
            self.base_index is not None
            and self.previous_turn_settings is not None
            and self.reference != _NEVER_SET
        )


def _turn_ids_compatible(active: str | None, other: str | None) -> bool:
    return active is None or other is None or active == other


def _scan_line(scan: _Scan, index: int, line: RolloutLine) -> None:
    payload = line.payload
    if line.kind == COMPACTED:
        seg = scan.segment()
        if seg.window is None and payload.get("window_number") is not None:
            seg.window = payload
        # Looking backwards, a compaction clears any older baseline unless a newer turn context re-set it.
        if seg.reference == _NEVER_SET:
            seg.reference = _CLEARED
        if seg.base_index is None and payload.get("replacement_history") is not None:
            seg.base_index = index
    elif line.kind == TURN_CONTEXT:
        seg = scan.segment()
        turn_id = payload.get("turn_id")
        if seg.turn_id is None:
            seg.turn_id = turn_id
        if _turn_ids_compatible(seg.turn_id, turn_id):
            seg.previous_turn_settings = {
                "model": payload.get("model"),
                "comp_hash": payload.get("comp_hash"),
                "realtime_active": payload.get("realtime_active"),
            }
            if seg.reference == _NEVER_SET:
                seg.reference = payload
    elif line.kind == RESPONSE_ITEM:
        seg = scan.segment()
        seg.counts_as_user_turn |= is_user_turn_boundary(payload)
    elif line.kind == EVENT_MSG:
        event_type = payload["type"]
        turn_id = payload.get("turn_id")
        if event_type == THREAD_ROLLED_BACK:
            scan.pending_rollback += payload["num_turns"]
        elif event_type in TURN_COMPLETE_TYPES:
            seg = scan.segment()
            if seg.turn_id is None:
                seg.turn_id = turn_id
        elif event_type == TURN_ABORTED:
            if scan.active is not None:
                if scan.active.turn_id is None:
                    scan.active.turn_id = turn_id
            elif turn_id is not None:
                scan.active = _Segment(turn_id=turn_id)
        elif event_type == USER_MESSAGE:
            scan.segment().counts_as_user_turn = True
        elif event_type in TURN_STARTED_TYPES:
            if scan.active is not None and _turn_ids_compatible(scan.active.turn_id, turn_id):
                scan.finalise()


def replay_line(history: list[Item], line: RolloutLine) -> tuple[list[Item], bool]:
    """Apply one line to the history in the forward replay (spec §8.2 step 2).

    Returns the new history and whether the line was a legacy compaction (which clears the reference context).
    A `response_item` is appended to `history` in place (replays stay linear); other changes build a new list.
    """
    if line.kind == RESPONSE_ITEM:
        history.append(line.payload)
        return history, False
    if line.kind == COMPACTED:
        replacement = line.payload.get("replacement_history")
        if replacement is not None:
            return list(replacement), False
        rebuilt = build_compacted_history([], collect_user_messages(history), line.payload["message"])
        return rebuilt, True
    if line.kind == EVENT_MSG and line.payload["type"] == THREAD_ROLLED_BACK:
        return drop_last_user_turns(history, line.payload["num_turns"]).history, False
    return history, False


def reconstruct_history(parsed: ParsedRollout) -> Reconstruction:
    """Rebuild history, window and resume metadata from a rollout alone, as Codex resume does (spec §8.2)."""
    lines = parsed.lines
    scan = _Scan()
    for index in range(len(lines) - 1, -1, -1):
        _scan_line(scan, index, lines[index])
        if scan.done():
            break
    scan.finalise()

    history: list[Item] = []
    start = 0
    if scan.base_index is not None:
        history = list(lines[scan.base_index].payload["replacement_history"])
        start = scan.base_index + 1
    legacy = 0
    for line in lines[start:]:
        history, was_legacy = replay_line(history, line)
        legacy += was_legacy

    reference = scan.reference if isinstance(scan.reference, dict) and not legacy else None
    window = scan.window
    if window is not None:
        window_fields = {
            "window_number": window["window_number"],
            "window_id": window.get("window_id"),
            "previous_window_id": window.get("previous_window_id"),
            "first_window_id": window.get("first_window_id"),
        }
    else:
        window_fields = {"window_number": sum(1 for line in lines if line.kind == COMPACTED)}
    return Reconstruction(
        history=history,
        previous_turn_settings=scan.previous_turn_settings,
        reference_context_item=reference,
        base_seq_index=scan.base_index,
        replayed_from=start,
        legacy_compactions_rebuilt=legacy,
        **window_fields,
    )
