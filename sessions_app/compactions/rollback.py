"""Rolling back and redoing a compaction, and thread rollback by user turns (spec §8.2, §8.3; design user story 5).

Nothing is ever removed from the rollout. A rollback appends a `rollback` line carrying the exact history, window
fields and context baseline the session had right before the compaction (rebuilt with the projection fold from the
rollout lines before its `compacted` line), so the fold installs that state again as a new window state that refers
to the old ids. A redo appends a `redo` line re-installing exactly what the compacted line installed.

Which compactions are rolled back is read from the rollout (the truth); `Compaction.rolled_back` is a cache of it.
Rollback lines name compactions by the window id each compacted line opened (unique per session and kept by the
Codex export), plus their database id and rollout seq for people reading the line.

Items appended after a compaction and before its rollback are part of what the rollback undoes: the history goes
back to the state right before the compaction. They stay in the rollout, and a redo is refused once the history
has moved on from the state the rollback produced.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import transaction

from compaction_app import records
from compaction_app.audit import record_audit
from compaction_app.models import AuditEntry, Compaction
from compactweb.domain_errors import Conflict
from sessions_app.codex_rollout import plan_thread_rollback
from sessions_app.models import LiveItem, RolloutLine, Session
from sessions_app.rollout import projection as p
from sessions_app.rollout.lease import session_lease
from sessions_app.rollout.services import NewLine, append_rollout_lines

COMPACTION_ROLLBACK = "compaction_rollback"
COMPACTION_REDO = "compaction_redo"
THREAD_ROLLBACK = "thread_rollback"


class RollbackRefused(Conflict):
    """A rollback, redo or thread rollback that cannot run in the session's current state."""

    code = "conflict"


# --- plain data: which compactions are rolled back, read from rollout lines -------------------------------------


@dataclass(frozen=True)
class CompactionState:
    """A compaction as the rollout tells it: live or rolled back, and the rollback line that rolled it back last."""

    key: str
    seq: int
    rolled_back: bool = False
    rollback_seq: int | None = None


def compaction_key(*, window_id: str | None, seq: int) -> str:
    """How rollback lines name a compaction: the window id its compacted line opened, else its seq."""
    return str(window_id) if window_id else f"seq:{seq}"


def _ref_key(ref: Any) -> str | None:
    if not isinstance(ref, dict):
        return None
    if ref.get("window_id") or ref.get("seq") is not None:
        return compaction_key(window_id=ref.get("window_id"), seq=ref.get("seq") or 0)
    return None


def fold_compaction_states(lines: Iterable[tuple[int, str, dict[str, Any]]]) -> dict[str, CompactionState]:
    """Fold (seq, kind, payload) lines into the state of every compaction, keyed by `compaction_key`.

    A `compacted` line adds a live compaction; a compaction rollback marks the compaction it names and every one it
    lists in `undoes` rolled back; a compaction redo makes the one it names live again. Thread rollbacks leave
    compactions as they are (they cut turns, spec §8.3).
    """
    states: dict[str, CompactionState] = {}
    for seq, kind, payload in lines:
        if kind == p.COMPACTED:
            key = compaction_key(window_id=payload.get("window_id"), seq=seq)
            states[key] = CompactionState(key=key, seq=seq)
        elif kind == p.ROLLBACK and payload.get("source") == COMPACTION_ROLLBACK:
            for ref in [payload.get("rolled_back_compaction"), *(payload.get("undoes") or [])]:
                key = _ref_key(ref)
                if key in states:
                    states[key] = replace(states[key], rolled_back=True, rollback_seq=seq)
        elif kind == p.REDO:
            key = _ref_key(payload.get("redone_compaction"))
            if key in states:
                states[key] = replace(states[key], rolled_back=False, rollback_seq=None)
    return states


def first_difference(current: list[Any], expected: list[Any]) -> int | None:
    """The first position where two histories differ (None when equal)."""
    for i, (a, b) in enumerate(zip(current, expected, strict=False)):
        if a != b:
            return i
    return None if len(current) == len(expected) else min(len(current), len(expected))


# --- reads ---------------------------------------------------------------------------------------------------------


def _state_lines(session_id: int) -> Iterator[tuple[int, str, dict[str, Any]]]:
    # Only the lines that matter, and without their (possibly large) replacement histories.
    rows = (
        RolloutLine.objects.filter(session_id=session_id, kind__in=(p.COMPACTED, p.ROLLBACK, p.REDO))
        .order_by("seq")
        .values_list(
            "seq", "kind", "payload__window_id", "payload__source", "payload__rolled_back_compaction",
            "payload__undoes", "payload__redone_compaction",
        )
    )
    for seq, kind, window_id, source, rolled_back, undoes, redone in rows.iterator(chunk_size=2000):
        yield seq, kind, {
            "window_id": window_id, "source": source, "rolled_back_compaction": rolled_back, "undoes": undoes,
            "redone_compaction": redone,
        }


def compaction_states(*, session_id: int) -> dict[str, CompactionState]:
    """The rolled-back state of every compaction of a session, read from its rollout."""
    return fold_compaction_states(_state_lines(session_id))


def _key_of(compaction: Compaction) -> str:
    return compaction_key(window_id=compaction.window_id, seq=compaction.rollout_seq)


def _lines_before(session_id: int, seq: int) -> Iterator[p.Line]:
    rows = (
        RolloutLine.objects.filter(session_id=session_id, seq__lt=seq)
        .order_by("seq")
        .values_list("seq", "kind", "payload", "tokens", "item_tokens")
    )
    for line_seq, kind, payload, tokens, item_tokens in rows.iterator(chunk_size=2000):
        yield p.Line(seq=line_seq, kind=kind, payload=payload, tokens=tokens, item_tokens=item_tokens)


def state_before(*, compaction: Compaction) -> p.Projection:
    """The session's live state right before the compaction: the fold of every rollout line before its
    `compacted` line (spec §8.2: the rollout alone rebuilds any earlier state)."""
    return p.Projection.rebuild(_lines_before(compaction.session_id, compaction.rollout_seq))


def later_live_compactions(*, compaction: Compaction, states: dict[str, CompactionState]) -> list[Compaction]:
    """Compactions after this one that are live now: rolling this one back undoes them too."""
    later = Compaction.objects.filter(session_id=compaction.session_id, rollout_seq__gt=compaction.rollout_seq)
    return [c for c in later.order_by("rollout_seq") if not getattr(states.get(_key_of(c)), "rolled_back", True)]


def rollback_preview(compaction: Compaction) -> dict[str, Any]:
    """What a rollback of `compaction` would do, for the confirmation form and the API: the later compactions it
    also undoes (rows), and the history it would restore (item count, token estimate)."""
    states = compaction_states(session_id=compaction.session_id)
    state = states.get(_key_of(compaction))
    before = state_before(compaction=compaction)
    meter = before.header.meter
    return {
        "compaction": compaction.pk,
        "rolled_back": bool(state and state.rolled_back),
        "undoes": later_live_compactions(compaction=compaction, states=states),  # rows: the API's one shape of them
        "items_before": len(before.entries),
        "window_tokens_before": compaction.tokens_before,
        "restored_tokens_estimate": meter.base_tokens + meter.history_tokens,
        "window_number_before": before.header.window_number,
    }


def _ref(compaction: Compaction) -> dict[str, Any]:
    return {"id": compaction.pk, "seq": compaction.rollout_seq, "window_id": compaction.window_id}


def _live_history(session_id: int) -> list[Any]:
    return list(LiveItem.objects.filter(session_id=session_id).order_by("position").values_list("item", flat=True))


def _actor_name(actor) -> str | None:
    return actor.get_username() if actor is not None and getattr(actor, "is_authenticated", False) else None


# --- writes --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RollbackResult:
    session: Session
    line: RolloutLine
    compaction: Compaction | None = None
    undoes: list[Compaction] = field(default_factory=list)
    removed_count: int = 0

    def as_dict(self) -> dict[str, Any]:
        session = self.session
        return {
            "session": session.pk,
            "rollout_seq": self.line.seq,
            "kind": self.line.kind,
            "source": self.line.payload.get("source"),
            "compaction": self.compaction.pk if self.compaction else None,
            "undoes": list(self.undoes),  # rows
            "removed_count": self.removed_count,
            "live_item_count": session.live_item_count,
            "tokens_in_window": session.tokens_in_window,
            "window_number": session.window_number,
            "window_id": session.window_id,
        }


def _compaction(compaction_id: int) -> Compaction:
    return Compaction.objects.select_related("session").get(pk=compaction_id)


def _rollback_refusal(compaction: Compaction, states: dict, expect_undoes: Collection[int] | None
                      ) -> tuple[CompactionState, list[Compaction]]:
    """The compaction's state and the later compactions its rollback would undo, or the refusal: not in the
    rollout, already rolled back, or later compactions other than the ones the caller named (`expect_undoes`; None
    when the caller confirmed nothing and undoing them is its choice)."""
    state = states.get(_key_of(compaction))
    if state is None:
        raise RollbackRefused(
            f"compaction {compaction.pk} has no compacted line in the rollout of session {compaction.session_id}",
            code="not_in_rollout",
        )
    if state.rolled_back:
        raise RollbackRefused(
            f"compaction {compaction.pk} is already rolled back (by rollout line {state.rollback_seq})",
            code="already_rolled_back",
        )
    undoes = later_live_compactions(compaction=compaction, states=states)
    if expect_undoes is not None and set(expect_undoes) != {c.pk for c in undoes}:
        named = ", ".join(f"#{c.pk}" for c in undoes) or "none"
        raise RollbackRefused(
            f"rolling back compaction {compaction.pk} would also undo the later compactions {named}; "
            f"name exactly those in expect_undoes to confirm (it named {sorted(set(expect_undoes)) or 'none'})",
            code="undoes_not_confirmed", undoes=undoes,  # rows: the API names them in its one shape
        )
    return state, undoes


def check_rollback(*, compaction_id: int, expect_undoes: Collection[int] | None = None) -> dict[str, Any]:
    """What a rollback would do now (the API's dry run), or the refusal a rollback would meet, without writing."""
    compaction = _compaction(compaction_id)
    _rollback_refusal(compaction, compaction_states(session_id=compaction.session_id), expect_undoes)
    return rollback_preview(compaction)


def do_rollback_compaction(*, compaction_id: int, actor=None, reason: str = "",
                           expect_undoes: Collection[int] | None = None) -> RollbackResult:
    """Restore the session to exactly the history and window it had right before the compaction (user story 5).

    Under the session's lease (raises SessionBusy while a compaction, turn or rollback runs). Later live
    compactions are undone too and listed in the line's `undoes`; when the caller names the ones it expects
    (`expect_undoes`), any other set is refused, checked under the lease. Raises RollbackRefused when the compaction
    is already rolled back, Compaction.DoesNotExist when there is no such compaction.
    """
    compaction = _compaction(compaction_id)
    session = compaction.session
    with session_lease(session_id=session.pk, purpose="rollback") as lease, transaction.atomic():
        lease.check()
        states = compaction_states(session_id=session.pk)
        _state, undoes = _rollback_refusal(compaction, states, expect_undoes)
        before = state_before(compaction=compaction)
        header = before.header
        payload = {
            "source": COMPACTION_ROLLBACK,
            "replacement_history": before.items,
            "window_number": header.window_number,
            "window_id": header.window_id or None,
            "previous_window_id": header.previous_window_id or None,
            "first_window_id": header.first_window_id or None,
            "reference_context_set": header.reference_context_set,
            "restored_from_seq": compaction.rollout_seq - 1,
            "rolled_back_compaction": _ref(compaction),
            "undoes": [_ref(c) for c in undoes],
            "actor": _actor_name(actor),
            "reason": reason,
        }
        (line,) = append_rollout_lines(session=session, lines=[NewLine(p.ROLLBACK, payload)], actor=actor)
        records.set_rolled_back(compaction_ids=[compaction.pk, *(c.pk for c in undoes)], rolled_back=True)
        record_audit(
            action=AuditEntry.Action.ROLLBACK, actor=actor, session=session, compaction=compaction, reason=reason,
            detail={"rollout_seq": line.seq, "undoes": [c.pk for c in undoes], "items": len(before.entries)},
        )
    compaction.rolled_back = True
    return RollbackResult(session=session, line=line, compaction=compaction, undoes=undoes)


def _installed_right_after(session_id: int, seq: int) -> bool:
    """Whether the compaction installed a context baseline: Codex writes a `turn_context` right after the
    `compacted` line (and an optional `world_state`) only then (spec §8.1 step 4)."""
    following = RolloutLine.objects.filter(session_id=session_id, seq__gt=seq).order_by("seq")[:2]
    for line in following:
        if line.kind == p.TURN_CONTEXT:
            return True
        if line.kind != "world_state":
            return False
    return False


def do_redo_compaction(*, compaction_id: int, actor=None, reason: str = "") -> RollbackResult:
    """Re-apply a rolled-back compaction exactly as it was recorded: the same replacement history and window.

    Refused (RollbackRefused) unless the compaction is rolled back now and the live history still equals the
    state the rollback produced, so a redo never discards what happened since.
    """
    compaction = _compaction(compaction_id)
    session = compaction.session
    with session_lease(session_id=session.pk, purpose="redo") as lease, transaction.atomic():
        lease.check()
        state = compaction_states(session_id=session.pk).get(_key_of(compaction))
        if state is None:
            raise RollbackRefused(
                f"compaction {compaction.pk} has no compacted line in the rollout of session {session.pk}",
                code="not_in_rollout",
            )
        if not state.rolled_back:
            raise RollbackRefused(
                f"compaction {compaction.pk} is not rolled back: it is live, so there is nothing to redo",
                code="not_rolled_back",
            )
        rollback_line = RolloutLine.objects.get(session=session, seq=state.rollback_seq)
        produced = rollback_line.payload["replacement_history"]
        current = _live_history(session.pk)
        diff = first_difference(current, produced)
        if diff is not None:
            raise RollbackRefused(
                f"the history of session {session.pk} changed since rollout line {rollback_line.seq} rolled "
                f"compaction {compaction.pk} back ({len(produced)} items then, {len(current)} now, first difference "
                f"at position {diff}); a redo would discard those changes",
                code="history_changed",
            )
        compacted = RolloutLine.objects.get(session=session, seq=compaction.rollout_seq).payload
        payload = {
            "source": COMPACTION_REDO,
            "replacement_history": compacted["replacement_history"],
            **{k: compacted.get(k) for k in p.WINDOW_FIELDS},
            "reference_context_set": _installed_right_after(session.pk, compaction.rollout_seq),
            "redone_compaction": _ref(compaction),
            "rollback_seq": rollback_line.seq,
            "actor": _actor_name(actor),
            "reason": reason,
        }
        (line,) = append_rollout_lines(session=session, lines=[NewLine(p.REDO, payload)], actor=actor)
        records.set_rolled_back(compaction_ids=[compaction.pk], rolled_back=False)
        record_audit(
            action=AuditEntry.Action.REDO, actor=actor, session=session, compaction=compaction, reason=reason,
            detail={"rollout_seq": line.seq, "rollback_seq": rollback_line.seq},
        )
    compaction.rolled_back = False
    return RollbackResult(session=session, line=line, compaction=compaction)


def thread_rollback_line(*, history: list[Any], num_turns: int, actor=None, reason: str = "",
                         source: str = THREAD_ROLLBACK) -> tuple[NewLine, int]:
    """The `rollback` line dropping the last `num_turns` user turns of `history` (spec §8.3), and how many items
    it removes. Raises ThreadRollbackError for num_turns < 1 and RollbackRefused when there is no user turn."""
    plan = plan_thread_rollback(history, num_turns)
    if plan.removed_count == 0:
        raise RollbackRefused("the history has no user turn to roll back", code="nothing_to_roll_back")
    payload: dict[str, Any] = {
        "source": source,
        "num_turns": num_turns,
        "replacement_history": plan.history,
        "removed_count": plan.removed_count,
        "actor": _actor_name(actor),
        "reason": reason,
    }
    if plan.clears_baseline:
        # A trimmed developer message mixed injected and persistent text: the next turn re-injects full context.
        payload["reference_context_set"] = False
    return NewLine(p.ROLLBACK, payload), plan.removed_count


def do_thread_rollback(*, session_id: int, num_turns: int, actor=None, reason: str = "") -> RollbackResult:
    """Drop the last `num_turns` user turns of the live history, across compaction boundaries (spec §8.3).

    Raises ThreadRollbackError ("num_turns must be >= 1") before touching anything, SessionBusy while another
    writer holds the session, RollbackRefused when the history has no user turn.
    """
    plan_thread_rollback([], num_turns)  # validates num_turns before taking the lease
    with session_lease(session_id=session_id, purpose="thread rollback") as lease, transaction.atomic():
        lease.check()
        session = Session.objects.select_related("provider", "policy").get(pk=session_id)
        line, removed = thread_rollback_line(
            history=_live_history(session_id), num_turns=num_turns, actor=actor, reason=reason
        )
        (row,) = append_rollout_lines(session=session, lines=[line], actor=actor)
        record_audit(
            action=AuditEntry.Action.THREAD_ROLLBACK, actor=actor, session=session, reason=reason,
            detail={"rollout_seq": row.seq, "num_turns": num_turns, "removed_count": removed},
        )
    return RollbackResult(session=session, line=row, removed_count=removed)
