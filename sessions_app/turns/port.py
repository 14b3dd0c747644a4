"""The turn loop's port onto one session in the database (`SessionTurnPort`, sessions_app.turns.loop.TurnPort):
what the loop reads of the session, and how its records become rollout lines."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async

from compaction_app.engine.history_snapshot import HistorySnapshot
from compaction_app.engine.items import Item
from compaction_app.engine.thresholds import ModelLimits
from compaction_app.engine.vocabulary import Reason
from compactweb import db_outage
from sessions_app.compactions import services as compaction
from sessions_app.compactions import settings_builder
from sessions_app.compactions.alerts import record_turn
from sessions_app.models import RolloutLine, Session
from sessions_app.rollout import events, selectors
from sessions_app.rollout import lease as locks
from sessions_app.rollout.projection import EVENT_MSG, RESPONSE_ITEM, TURN_CONTEXT
from sessions_app.rollout.services import LeaseTerms, NewLine, append_rollout_lines, usage_line
from sessions_app.turns.caches import history_cache, turn_context_cache
from sessions_app.turns.loop import (
    Marker,
    Record,
    TurnCompactionFailed,
    TurnState,
    UsageRecord,
    previous_model_from_turn_context,
    previous_settings_from_turn_context,
)

logger = logging.getLogger(__name__)
RECENT_LINES = 2_000  # how far back the previous turn's context is looked for first


def model_limits(session: Session) -> ModelLimits:
    """The current model as the threshold checks see it: the session's provider row and policy (spec §2.2)."""
    provider = session.provider
    return ModelLimits(
        slug=provider.model,
        context_window=provider.context_window,
        effective_percent=provider.effective_context_window_percent,
        configured_limit=session.policy.auto_compact_token_limit,
        comp_hash=provider.comp_hash or None,
    )


def previous_turn_context(session: Session) -> dict[str, Any] | None:
    """The previous turn's settings (spec §2.4 step 1a): the newest `turn_context` line that records a model
    window. A compaction's own `turn_context` (mid-turn) repeats the turn's model without its window, so it is
    skipped; the turn's line before it names the same model."""
    lines = RolloutLine.objects.filter(session_id=session.pk, kind=TURN_CONTEXT).order_by("-seq")
    # The newest few of the last lines first, checked here: a filter on the kind or a JSON key alone let
    # PostgreSQL scan a long session's whole rollout (40-50 ms at 100k lines); a seq range keeps it on the
    # (session, seq) index. The line wanted is nearly always the previous turn's, among the last lines.
    recent = lines.filter(seq__gt=max(0, session.last_seq - RECENT_LINES))
    for payload in recent.values_list("payload", flat=True)[:8]:
        if isinstance(payload, dict) and "context_window" in payload:
            return payload
    return lines.filter(payload__has_key="context_window").values_list("payload", flat=True).first()


def _to_lines(records: Sequence[Record], session: Session) -> list[NewLine]:
    lines = []
    for record in records:
        if isinstance(record, UsageRecord):
            usage = record.usage
            lines.append(usage_line(
                usage={"input_tokens": usage.input_tokens, "cached_input_tokens": usage.cached_input_tokens,
                       "output_tokens": usage.output_tokens, "total_tokens": usage.total_tokens},
                reasoning_included=record.reasoning_included,
                model_context_window=session.provider.usable_context_window,
            ))
        elif isinstance(record, Marker):
            lines.append(NewLine(record.kind, dict(record.payload)))
        else:
            lines.append(NewLine(RESPONSE_ITEM, record))
    return lines


def _turn_state(session: Session, previous: dict[str, Any] | None) -> TurnState:
    """The loop's view of the session, from the columns the turn already holds (no database access)."""
    return TurnState(
        thread_id=str(session.thread_id),
        window_number=session.window_number,
        window_id=session.window_id,
        first_window_id=session.first_window_id,
        previous_window_id=session.previous_window_id,
        active_tokens=session.tokens_in_window,
        prefill=session.meter_prefill,
        scope=session.policy.auto_compact_scope,
        current=model_limits(session),
        previous=previous_model_from_turn_context(previous, configured_limit=session.policy.auto_compact_token_limit),
        reference_context_set=session.reference_context_set,
        last_seq=session.last_seq,
        previous_settings=previous_settings_from_turn_context(previous),
    )


@dataclass(frozen=True)
class Holding:
    """How the turn holds its session. `lease`: held, or (`take_lease_in_first_write`) taken by the turn's first
    write; an `own` lease is released by the turn's last write, or by the run when the turn ended another way.
    `keep`: a turn whose last write gave the lease back leaves its session in `idle_sessions` with `stamp`, which
    the write that takes the lease checks when `check_stamp`."""

    lease: locks.Lease
    own: bool
    take_lease_in_first_write: bool = False
    stamp: selectors.ConfigStamp | None = None
    check_stamp: bool = False
    keep: bool = False


class SessionTurnPort:
    """The turn loop's port onto one session in the database (sessions_app.turns.loop.TurnPort).

    The session is loaded once per turn (with its provider and policy) and kept current by the turn's own appends,
    which refresh its header columns; only a compaction, which writes the session itself, makes the port reload it.
    The turn holds the session's lease, so nothing else installs history meanwhile (an API append of a user message
    still may: every append locks the row and reads the true header). Live events of the appends are published from
    the async side after each write, not through a sync-to-async hop inside it.
    """

    def __init__(
        self, *, session_id: int, turn_id: str, holding: Holding | None, actor=None,
        initial_context: Callable[[Session, TurnState], list[Item]] | None = None,
        clock: Callable[[], float] = time.monotonic, session: Session | None = None,
    ) -> None:
        self.session_id = session_id
        self.turn_id = turn_id
        self.lease = lease = holding.lease if holding is not None else None
        self.actor = actor
        self._initial_context = initial_context
        self._clock = clock
        self._renewed_at = clock()
        self._previous_loaded = False
        self._previous: dict[str, Any] | None = None
        self._session: Session | None = session
        self._started_with = session
        self._release_on_complete = holding is not None and holding.own
        # Own-lease turns take the lease with their first lines (`lease.planned`): until then nothing is held.
        # `stamp`: the configuration a copy kept in `idle_sessions` was read with by an earlier turn; the write that
        # takes the lease checks it is still the database's.
        self._lease_to_take = lease if holding is not None and holding.take_lease_in_first_write else None
        self._stamp = holding.stamp if holding is not None and holding.check_stamp else None
        self.lease_released = False
        self.alerts_recorded = False
        self.first_seq: int | None = None

    # --- sync halves (run in Django's sync thread) ---

    def _load(self) -> Session:
        self._session = selectors.get_session(session_id=self.session_id)
        return self._session

    def _cached_previous(self) -> bool:
        if self._session is not None and not self._previous_loaded:
            found, previous = turn_context_cache.get(self._session.pk, self._session.last_seq)
            if found:
                self._previous, self._previous_loaded = previous, True
        return self._previous_loaded

    def _state(self) -> TurnState:
        session = self._session or self._load()
        if not self._previous_loaded:
            found, previous = turn_context_cache.caught_up(session.pk, session.last_seq)
            if not found:
                # Read once per turn: the previous-model check runs only at the turn's start.
                previous = previous_turn_context(session)
                turn_context_cache.put(session.pk, session.last_seq, previous)
            self._previous, self._previous_loaded = previous, True
        return _turn_state(session, self._previous)

    def _history(self) -> HistorySnapshot:
        session = self._session or self._load()
        found, items = history_cache.caught_up(session.pk, session.last_seq)
        if not found:
            items = selectors.live_items(session=session)
            history_cache.put(session.pk, session.last_seq, items)
        return HistorySnapshot(items)

    def _record(self, records: Sequence[Record]) -> list:
        session = self._session or self._load()
        completes = self._release_on_complete and _completes_turn(records, self.turn_id)
        published: list[events.Publication] = []  # sent by `record` from the event loop: no hop back per event
        rows = append_rollout_lines(
            session=session, lines=_to_lines(records, session), actor=self.actor,
            lease=LeaseTerms(
                release=self.lease.holder if completes else None, take=self._lease_to_take,
                # Every write after the one that takes the lease: only while the lease is still this turn's (issue
                # 42: a turn whose lease was taken over, and its turn ended by the taker, wrote a second
                # turn_complete).
                held_by=self.lease.holder if self.lease is not None and self._lease_to_take is None else None,
                unchanged=(partial(selectors.config_unchanged, stamp=self._stamp)
                           if self._lease_to_take is not None and self._stamp is not None else None)),
            outbox=published,
        )
        self._lease_to_take = None
        if completes and not session.lease_holder:
            self.lease_released = True
        if self.first_seq is None and rows:
            self.first_seq = rows[0].seq
        if _completes_turn(records, self.turn_id) and self.first_seq is not None:
            # The alert watch reads the finished turn in the same trip to the database thread.
            record_turn_alerts(session_id=session.pk, first_seq=self.first_seq, last_seq=session.last_seq)
            self.alerts_recorded = True
        # Where this append started is where the rollout stood under its lock, not what the session said before it:
        # a line appended in between (an API append during a turn) must make the caches forget, not be skipped.
        before = rows[0].seq - 1 if rows else session.last_seq
        history_cache.appended(session.pk, before_seq=before, after_seq=session.last_seq, rows=rows)
        turn_context_cache.appended(session.pk, before_seq=before, after_seq=session.last_seq, rows=rows)
        return published

    @property
    def kept_session(self) -> Session | None:
        """The session object the turn started with, when nothing replaced it (a compaction makes the port read
        the session again): its header is as the turn's last write left it."""
        return self._session if self._session is self._started_with else None

    @property
    def lease_held(self) -> bool:
        """Whether the turn's lease is (or was) taken: false until the first write of a turn that takes it there."""
        return self.lease is not None and self._lease_to_take is None

    @property
    def last_seq(self) -> int:
        return self._session.last_seq if self._session is not None else 0

    # --- the port ---

    async def state(self) -> TurnState:
        if self._session is not None and self._cached_previous():
            return _turn_state(self._session, self._previous)
        return await sync_to_async(self._state)()

    async def history(self) -> HistorySnapshot:
        if self._session is not None:
            cached = history_cache.get(self._session.pk, self._session.last_seq)
            if cached is not None:
                return cached
        return await sync_to_async(self._history)()

    async def initial_context(self, state: TurnState) -> list[Item]:
        session = self._session or await sync_to_async(self._load)()
        if self._initial_context is not None:
            return self._initial_context(session, state)
        return settings_builder.render_initial_context(
            list(session.initial_context), thread_id=state.thread_id, first_window_id=state.first_window_id,
            current_window_id=state.window_id, previous_window_id=state.previous_window_id or None,
        )

    async def record(self, records: Sequence[Record]) -> None:
        if records:
            # A conflict (PostgreSQL rolled this write back as a deadlock's victim or a serialization failure) is
            # run again, bounded and jittered (compactweb.db_outage.retry_on_conflict): the append is one
            # transaction that leaves the session copy as it was when it fails, and what follows it (caches,
            # alerts) runs only once it committed, so a retry writes the lines once. Only a conflict that outlasts
            # the retries, or an outage, ends the turn with an error line (issue 42).
            published = await sync_to_async(db_outage.retry_on_conflict)(partial(self._record, records))
            await events.apublish(published)

    async def compact(self, *, reason: Reason, phase: str, compact_with: ModelLimits | None) -> None:
        failures = (compaction.CompactionFailed, compaction.CompactionRefused, compaction.CompactionInterrupted,
                    locks.SessionBusy, locks.LeaseLost)
        try:
            await compaction.acompact_session(
                session_id=self.session_id, actor=self.actor, lease=self.lease,
                ask=compaction.CompactionAsk(trigger="auto", reason=reason.value, phase=phase,
                                             compact_with=compact_with, turn_id=self.turn_id),
            )
        except failures as exc:
            raise TurnCompactionFailed(str(exc), code=_compaction_error_code(exc)) from exc
        finally:
            # The compaction replaced the history (or may have) and wrote the session: reload both.
            history_cache.forget(self.session_id)
            turn_context_cache.forget(self.session_id)
            self._session = None

    async def heartbeat(self) -> None:
        if self.lease is not None and self._clock() - self._renewed_at > self.lease.ttl.total_seconds() / 4:
            await sync_to_async(self.lease.renew)()
            self._renewed_at = self._clock()

    async def publish(self, kind: str, detail: dict[str, Any]) -> None:
        after = self._session.last_seq if self._session is not None else 0
        await events.apublish_transient(session_id=self.session_id, after_seq=after, kind=kind, detail=detail)


def _completes_turn(records: Sequence[Record], turn_id: str) -> bool:
    """Whether `records` end the turn (its `turn_complete` line): the write that may release the turn's lease."""
    return any(
        isinstance(r, Marker) and r.kind == EVENT_MSG and r.payload.get("type") == "turn_complete"
        and r.payload.get("turn_id") == turn_id
        for r in records
    )


def _compaction_error_code(exc: Exception) -> str:
    """The turn's error code for a failed mid-turn compaction: the domain error's own (`busy`, `read_only`,
    `lease_lost`, `compaction_refused`...), but `compaction_interrupted`, which says more inside a turn than the
    compaction's `interrupted`."""
    if isinstance(exc, compaction.CompactionInterrupted):
        return "compaction_interrupted"
    return getattr(exc, "code", None) or "compaction_failed"


def record_turn_alerts(*, session_id: int, first_seq: int, last_seq: int) -> None:
    """Feed the finished turn to the alert watch (sessions_app.compactions.alerts); an alert never fails a turn."""
    try:
        record_turn(session_id=session_id, first_seq=first_seq, last_seq=last_seq)
    except Exception:
        logger.exception("alert check after a turn of session %s failed", session_id)

