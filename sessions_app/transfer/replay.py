"""Replay of a session under another policy, and its comparison with the original (design user story 7).

Replay re-appends the original's response items in order to a new session under another policy and lets the
pre-turn auto compaction of that policy run between turns (spec §2.4 step 1b), without calling the model for the
turns themselves: "what would have happened with threshold X or strategy Y"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from compaction_app.audit import record_audit
from compaction_app.engine.items import is_message, is_real_user_message, message_text
from compaction_app.engine.pins import PIN_EVENTS
from compaction_app.engine.thresholds import token_status
from compaction_app.engine.vocabulary import Phase, Reason, Trigger
from compaction_app.models import AuditEntry, CompactionPolicy, Provider
from sessions_app.compactions.rollback import (
    RollbackRefused,
    thread_rollback_line,
)
from sessions_app.compactions.services import (
    CompactionFailed,
    CompactionInterrupted,
    CompactionRefused,
    do_compact_session,
)
from sessions_app.models import Session
from sessions_app.rollout import projection as p
from sessions_app.rollout.lease import LeaseLost, SessionBusy
from sessions_app.rollout.services import (
    NewLine,
    append_rollout_lines,
    do_append_items,
    do_create_session,
)
from sessions_app.transfer.figures import session_figures
from sessions_app.transfer.lines import THREAD_ROLLBACK_SOURCES, fold_lines, strip_summary_prefix
from sessions_app.transfer.refusals import TransferRefused

REPLAY = "replay"


TURN_STARTED_EVENTS = frozenset({"turn_started", "task_started"})


def replay_comparison(*, replay: Session) -> dict[str, Any]:
    """The replay next to its original: the figures of both and the differences (replay minus original)."""
    if replay.origin_id is None:
        raise TransferRefused(f"session {replay.pk} is not a replay of another session", code="not_a_replay")
    original = Session.objects.select_related("provider", "policy").get(pk=replay.origin_id)
    ours, theirs = session_figures(session=replay), session_figures(session=original)
    return {
        "original": {"session": original.pk, "title": original.title, "policy": original.policy.name,
                     "provider": original.provider.name, **theirs},
        "replay": {"session": replay.pk, "title": replay.title, "policy": replay.policy.name,
                   "provider": replay.provider.name, **ours},
        "difference": {k: ours[k] - theirs[k] for k in ("compactions", "peak_tokens", "tokens_saved",
                                                        "final_tokens")},
        # a replay that stopped part way keeps what it wrote: its figures are a partial comparison, never a result
        "failed": replay.state == Session.State.FAILED,
    }


@dataclass
class ReplayResult:
    replay: Session
    original: Session
    compactions: int = 0
    failures: list[str] = field(default_factory=list)
    turns: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "replay": self.replay.pk,
            "original": self.original.pk,
            "turns": self.turns,
            "compactions": self.compactions,
            "failures": self.failures,
            "comparison": replay_comparison(replay=self.replay),
        }


def limit_reached(session: Session) -> bool:
    """The pre-turn limit check with the session's provider and policy (spec §2.3, §2.4 step 1b)."""
    provider, policy = session.provider, session.policy
    status = token_status(
        active_tokens=session.tokens_in_window,
        context_window=provider.context_window,
        effective_percent=provider.effective_context_window_percent,
        configured_limit=policy.auto_compact_token_limit,
        scope=policy.auto_compact_scope,
        prefill=session.meter_prefill,
    )
    return status.token_limit_reached


def _drop_summariser_output(pending: list[Any], message: str) -> None:
    """Codex streams a local compaction's summary into the rollout as an assistant message right before the
    `compacted` line (spec §8.1); it is the old policy's work, not a turn's output, so a replay drops it."""
    summary = strip_summary_prefix(message).strip()
    while summary and pending and is_message(pending[-1], "assistant") and message_text(pending[-1]).strip() == summary:
        pending.pop()


class _Replayer:
    def __init__(self, *, result: ReplayResult, actor, compact: Callable[..., Any]) -> None:
        self.result, self.actor, self.compact = result, actor, compact
        self.pending: list[Any] = []
        self.turn_open = False
        self.compaction_refused = False

    @property
    def session(self) -> Session:
        return self.result.replay

    def flush(self) -> None:
        if self.pending:
            do_append_items(session=self.session, items=self.pending, actor=self.actor)
            self.pending = []

    def start_turn(self) -> None:
        """A new turn begins: record what came before, then the pre-turn check (spec §2.4 step 1b)."""
        self.flush()
        self.result.turns += 1
        session = Session.objects.select_related("provider", "policy").get(pk=self.session.pk)
        if self.compaction_refused or not limit_reached(session):
            return
        try:
            self.compact(session_id=session.pk, actor=self.actor, trigger=Trigger.AUTO, reason=Reason.CONTEXT_LIMIT,
                         phase=Phase.PRE_TURN)
            self.result.compactions += 1
        except CompactionRefused as exc:
            self.compaction_refused = True  # a configuration problem: every later attempt would be refused too
            self.result.failures.append(f"turn {self.result.turns}: refused: {exc}")
        except (CompactionFailed, CompactionInterrupted, SessionBusy, LeaseLost) as exc:
            self.result.failures.append(f"turn {self.result.turns}: {exc}")
        self.session.refresh_from_db()

    def feed(self, line: p.Line) -> None:
        kind, payload = line.kind, line.payload
        if kind == p.RESPONSE_ITEM:
            if is_real_user_message(payload) and not self.turn_open:
                self.start_turn()
            self.turn_open = False
            self.pending.append(payload)
        elif kind == p.EVENT_MSG and payload.get("type") in TURN_STARTED_EVENTS:
            self.start_turn()
            self.turn_open = True
        elif kind == p.TURN_CONTEXT:
            self.flush()
            append_rollout_lines(session=self.session, lines=[NewLine(p.TURN_CONTEXT, payload)], actor=self.actor)
        elif kind == p.COMPACTED:
            _drop_summariser_output(self.pending, payload.get("message") or "")
        elif kind == p.EVENT_MSG and payload.get("type") in PIN_EVENTS:
            # Pinned context belongs to the conversation, not to the original's policy: the replay keeps it, so its
            # own compactions re-inject and check the same pins.
            self.flush()
            append_rollout_lines(session=self.session, lines=[NewLine(p.EVENT_MSG, payload)], actor=self.actor)
        elif kind == p.ROLLBACK and payload.get("source") in THREAD_ROLLBACK_SOURCES:
            self.flush()
            history = list(self.session.live_items.order_by("position").values_list("item", flat=True))
            try:
                new, _ = thread_rollback_line(history=history, num_turns=int(payload.get("num_turns") or 0),
                                              actor=self.actor, reason="replayed thread rollback")
            except (RollbackRefused, ValueError):
                return  # nothing to cut in the replay's history
            append_rollout_lines(session=self.session, lines=[new], actor=self.actor)
        # Everything else is the original policy's or operator's work (its compactions, compaction rollbacks and
        # redos, server usage of a different context) and is not replayed.


def do_replay_session(
    *,
    session_id: int,
    policy: CompactionPolicy,
    provider: Provider | None = None,
    title: str | None = None,
    actor=None,
    compact: Callable[..., Any] | None = None,
) -> ReplayResult:
    """Replay a session under another policy (and optionally provider) as a new session (source "replay",
    origin = the original): its response items in order, its turn contexts and thread rollbacks, with the new
    policy's pre-turn auto compaction between turns (spec §2.4 step 1b). Compaction failures are recorded on the
    replay and listed; the replay goes on. `compact` defaults to sessions_app.compactions.services.do_compact_session."""
    if compact is None:
        compact = do_compact_session
    original = Session.objects.select_related("provider", "policy").get(pk=session_id)
    provider = provider or original.provider
    replay = do_create_session(
        title=(title or f"{original.title} · replay under {policy.name}")[:200], provider=provider, policy=policy,
        base_instructions=original.base_instructions, actor=actor,
    )
    # The original's initial context is in its rollout and is replayed with the rest; kept on the row so the
    # replay's compactions re-inject it like the original's would.
    Session.objects.filter(pk=replay.pk).update(origin=original, source=REPLAY, initial_context=original.initial_context)
    replay.refresh_from_db()
    result = ReplayResult(replay=replay, original=original)
    replayer = _Replayer(result=result, actor=actor, compact=compact)
    try:
        for line in fold_lines(original.pk):
            if line.kind != p.SESSION_META:
                replayer.feed(line)
        replayer.flush()
    except Exception:
        Session.objects.filter(pk=replay.pk).update(state=Session.State.FAILED)
        raise
    replay.refresh_from_db()
    record_audit(
        action=AuditEntry.Action.REPLAY, actor=actor, session=replay,
        reason=f"replay of session {original.pk} under policy {policy.name}",
        detail={"original": original.pk, "policy": policy.pk, "provider": provider.pk, "turns": result.turns,
                "compactions": result.compactions, "failures": result.failures},
    )
    return result
