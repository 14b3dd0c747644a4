"""Turns against the database: the Django side of the turn loop (`sessions_app.turns.loop`).

`arun_turn` takes the session's lease (purpose "turn"), builds the provider client from the session's Provider row
and fault injection (through `sessions_app.compactions.settings_builder`, so a turn and a compaction see the same settings),
and runs the loop through `SessionTurnPort`, which appends rollout lines with `append_rollout_lines` and runs
automatic compactions with `sessions_app.compactions.services.acompact_session` under the same lease.

Per-turn cost does not grow with the history: the checks read the session's cached header (O(1)), appends are O(1)
per line, and the live history a request sends is kept in a per-process cache validated by the session's `last_seq`
(reloaded only after something else, e.g. a compaction, changed the history).
"""

from __future__ import annotations

import logging
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any, Generic, TypeVar

from asgiref.sync import async_to_sync, sync_to_async
from uuid6 import uuid7

from compaction_app.engine.history_snapshot import HistorySnapshot
from compaction_app.engine.items import Item, normalize_kind
from compaction_app.engine.lru import Lru
from compaction_app.engine.port import ModelClient
from compaction_app.engine.thresholds import ModelLimits
from compaction_app.engine.vocabulary import Reason
from compaction_app.providers.factory import build_client
from sessions_app.compactions import services as compaction
from sessions_app.compactions import settings_builder
from sessions_app.compactions.alerts import record_turn
from sessions_app.models import RolloutLine, Session
from sessions_app.rollout import events, selectors
from sessions_app.rollout import lease as locks
from sessions_app.rollout.projection import EVENT_MSG, HISTORY_INSTALLING_KINDS, RESPONSE_ITEM, TURN_CONTEXT
from sessions_app.rollout.services import NewLine, append_rollout_lines, usage_line
from sessions_app.rollout.validation import ItemValidationError, validate_item
from sessions_app.turns.loop import (
    SETTINGS_KEYS,
    Marker,
    Record,
    TurnCompactionFailed,
    TurnConfig,
    TurnResult,
    TurnState,
    UsageRecord,
    previous_model_from_turn_context,
    previous_settings_from_turn_context,
    run_turn_loop,
)

logger = logging.getLogger(__name__)
MAX_INPUT_CHARS = 1_000_000
RECENT_LINES = 2_000  # how far back the previous turn's context is looked for first
MAX_CATCH_UP_LINES = 2_000  # a cached value this far behind its session is followed along; further, read again
V = TypeVar("V")


class TurnInputError(ValueError):
    """The turn's user input is not acceptable; nothing was recorded."""


USER_INPUT_PART_TYPES = ("input_text", "input_image")


def validate_user_input(user_input: Any) -> str | list[dict[str, Any]]:
    """The turn's user input: a non-empty string, or a Codex-shaped list of content items (`input_text` and
    `input_image` parts, at least one of them carrying text or an image)."""
    if isinstance(user_input, list):
        if not user_input:
            raise TurnInputError("input: must be a non-empty string or a non-empty list of content items")
        try:
            validate_item({"type": "message", "role": "user", "content": user_input}, "input")
        except ItemValidationError as exc:
            raise TurnInputError(str(exc).replace("input.content", "input", 1)) from None
        for i, part in enumerate(user_input):
            if part.get("type") not in USER_INPUT_PART_TYPES:
                raise TurnInputError(f"input[{i}].type: must be one of {', '.join(USER_INPUT_PART_TYPES)}")
        size = sum(len(p.get("text") or "") + len(p.get("image_url") or "") for p in user_input)
        if size > MAX_INPUT_CHARS:
            raise TurnInputError(f"input: at most {MAX_INPUT_CHARS} characters, got {size}")
        if not any((p.get("text") or "").strip() or p.get("type") == "input_image" for p in user_input):
            raise TurnInputError("input: the content items carry no text and no image")
        return user_input
    if not isinstance(user_input, str) or not user_input.strip():
        raise TurnInputError("input: must be a non-empty string or a non-empty list of content items")
    if len(user_input) > MAX_INPUT_CHARS:
        raise TurnInputError(f"input: at most {MAX_INPUT_CHARS} characters, got {len(user_input)}")
    return user_input


class SeqKeyedCache(ABC, Generic[V]):
    """Per-session values of recently active sessions, each valid for exactly one `last_seq` (LRU, thread-safe).

    A turn's own appends carry an entry forward (`appended`). A line appended by anyone else (an API message,
    another worker running the session's last step: a fleet's steps go to any worker) moves the session's
    `last_seq` past the entry; `caught_up` then follows the entry along the lines appended since, read by seq
    range, so the next turn reads what is new, not the whole history again."""

    def __init__(self, size: int = 256) -> None:
        self._entries: Lru[int, tuple[int, V]] = Lru(size)

    def _lookup(self, session_id: int, last_seq: int) -> tuple[bool, V | None]:
        with self._entries.lock:
            entry = self._entries.peek(session_id)
            if entry is None or entry[0] != last_seq:
                return False, None
            self._entries.get(session_id)  # a use
            return True, entry[1]

    def put(self, session_id: int, last_seq: int, value: V) -> None:
        self._entries.put(session_id, (last_seq, value))

    def appended(self, session_id: int, *, before_seq: int, after_seq: int, rows: Sequence[RolloutLine]) -> None:
        """Lines `before_seq`+1..`after_seq` (`rows`) were appended: follow along. An entry at another seq is left
        as it is: the rollout is append-only, so it stays the value at its own seq, which `caught_up` follows
        from."""
        with self._entries.lock:
            entry = self._entries.peek(session_id)
            if entry is None or entry[0] != before_seq:
                return
            self._entries.put(session_id, (after_seq, self._follow(entry[1], rows)))

    def caught_up(self, session_id: int, last_seq: int) -> tuple[bool, V | None]:
        """(True, the value at `last_seq`): the entry, or an entry at most MAX_CATCH_UP_LINES behind followed along
        the lines appended since (one range read, outside the lock; the entry is followed only if nobody moved it
        meanwhile); (False, None) when there is no such entry."""
        entry = self._entries.peek(session_id)
        if entry is None or not 0 <= last_seq - entry[0] <= MAX_CATCH_UP_LINES:
            return False, None
        if entry[0] == last_seq:
            return self._lookup(session_id, last_seq)
        rows = selectors.lines_between(session_id=session_id, after_seq=entry[0], upto_seq=last_seq)
        if len(rows) != last_seq - entry[0]:  # not every line is there to read: read the value in full
            return False, None
        with self._entries.lock:
            if self._entries.peek(session_id) is not entry:
                return False, None
            value = self._follow(entry[1], rows)
            self._entries.put(session_id, (last_seq, value))
            return True, value

    def forget(self, session_id: int) -> None:
        self._entries.pop(session_id)

    @abstractmethod
    def _follow(self, value: V, rows: Sequence[RolloutLine]) -> V:
        """`value` once `rows` are appended."""


class HistoryCache(SeqKeyedCache[list[Item]]):
    """Live histories: a session's model-visible items. The cached list only ever grows in place (a new history
    replaces it), so `get` hands out a `HistorySnapshot` of it: an O(1) request input that later appends do not
    change."""

    def get(self, session_id: int, last_seq: int) -> HistorySnapshot | None:
        found, items = self._lookup(session_id, last_seq)
        return HistorySnapshot(items) if found else None

    def _follow(self, value: list[Item], rows: Sequence[RolloutLine]) -> list[Item]:
        # The projection's fold (spec §8.2) restricted to the items: an item line appends, a line that installs
        # a history replaces the list (a new one: snapshots of the old one stay as they were).
        for r in rows:
            if r.kind == RESPONSE_ITEM:
                value.append(normalize_kind(r.payload))
            elif r.kind in HISTORY_INSTALLING_KINDS:
                value = [normalize_kind(i) for i in r.payload.get("replacement_history") or []]
        return value


history_cache = HistoryCache()


class TurnContextCache(SeqKeyedCache[dict[str, Any] | None]):
    """The previous turn's context (`previous_turn_context`): a turn's own appends carry it forward or replace it
    with the turn's own `turn_context`, so the next turn of a session this process ran reads no rollout line for
    it."""

    def get(self, session_id: int, last_seq: int) -> tuple[bool, dict[str, Any] | None]:
        return self._lookup(session_id, last_seq)

    def _follow(self, value: dict[str, Any] | None, rows: Sequence[RolloutLine]) -> dict[str, Any] | None:
        for row in rows:
            if row.kind == TURN_CONTEXT and isinstance(row.payload, dict) and "context_window" in row.payload:
                value = row.payload
        return value


turn_context_cache = TurnContextCache()


class IdleSessions:
    """Sessions whose last turn this process ran, as that turn's last write left them (header current, provider
    and policy loaded), with the stamp of the configuration they were read with: the next own-lease turn of such a
    session starts without reading it, and its first write, which takes the lease, checks under the row lock that
    the rollout, the lease and the configuration are still what this copy says (else the turn reads the session
    again and starts over; nothing was written). A copy is taken out while a turn uses it (LRU, thread-safe)."""

    def __init__(self, size: int = 256) -> None:
        self._entries: Lru[int, tuple[Session, selectors.ConfigStamp]] = Lru(size)

    def take(self, session_id: int) -> tuple[Session, selectors.ConfigStamp] | None:
        return self._entries.pop(session_id)

    def put(self, session: Session, stamp: selectors.ConfigStamp) -> None:
        self._entries.put(session.pk, (session, stamp))


idle_sessions = IdleSessions()


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


def validate_settings_change(settings: Any) -> dict[str, Any]:
    """A turn's settings change: an object with any of cwd, approval_policy (strings), sandbox_policy (a string
    or an object) and model (a string). Anything else is refused before anything is recorded."""
    if settings is None:
        return {}
    if not isinstance(settings, dict):
        raise TurnInputError("settings: must be an object")
    unknown = sorted(set(settings) - set(SETTINGS_KEYS))
    if unknown:
        raise TurnInputError(f"settings.{unknown[0]}: unknown setting; choose from {', '.join(SETTINGS_KEYS)}")
    for key, value in settings.items():
        ok = isinstance(value, str) and value.strip() or (key == "sandbox_policy" and isinstance(value, dict))
        if not ok:
            raise TurnInputError(f"settings.{key}: must be a non-empty string"
                                 + (" or an object" if key == "sandbox_policy" else ""))
    return dict(settings)


class SessionTurnPort:
    """The turn loop's port onto one session in the database (sessions_app.turns.loop.TurnPort).

    The session is loaded once per turn (with its provider and policy) and kept current by the turn's own appends,
    which refresh its header columns; only a compaction, which writes the session itself, makes the port reload it.
    The turn holds the session's lease, so nothing else installs history meanwhile (an API append of a user message
    still may: every append locks the row and reads the true header). Live events of the appends are published from
    the async side after each write, not through a sync-to-async hop inside it.
    """

    def __init__(
        self, *, session_id: int, turn_id: str, lease: locks.Lease | None, actor=None,
        initial_context: Callable[[Session, TurnState], list[Item]] | None = None,
        clock: Callable[[], float] = time.monotonic, session: Session | None = None,
        release_lease_on_complete: bool = False, take_lease_in_first_write: bool = False,
        stamp: selectors.ConfigStamp | None = None,
    ) -> None:
        self.session_id = session_id
        self.turn_id = turn_id
        self.lease = lease
        self.actor = actor
        self._initial_context = initial_context
        self._clock = clock
        self._renewed_at = clock()
        self._previous_loaded = False
        self._previous: dict[str, Any] | None = None
        self._session: Session | None = session
        self._started_with = session
        self._release_on_complete = release_lease_on_complete and lease is not None
        # Own-lease turns take the lease with their first lines (`lease.planned`): until then nothing is held.
        # `stamp`: the configuration a copy kept in `idle_sessions` was read with by an earlier turn; the write that
        # takes the lease checks it is still the database's.
        self._lease_to_take = lease if take_lease_in_first_write else None
        self._stamp = stamp
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
            release_lease=self.lease.holder if completes else None, take_lease=self._lease_to_take,
            unchanged=(partial(selectors.config_unchanged, stamp=self._stamp)
                       if self._lease_to_take is not None and self._stamp is not None else None),
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
            await events.apublish(await sync_to_async(self._record)(records))

    async def compact(self, *, reason: Reason, phase: str, compact_with: ModelLimits | None) -> None:
        failures = (compaction.CompactionFailed, compaction.CompactionRefused, compaction.CompactionInterrupted,
                    locks.SessionBusy, locks.LeaseLost)
        try:
            await compaction.acompact_session(
                session_id=self.session_id, actor=self.actor, trigger="auto", reason=reason.value, phase=phase,
                lease=self.lease, compact_with_model=compact_with.slug if compact_with else None,
                compact_with_window=compact_with.context_window if compact_with else None,
                turn_id=self.turn_id,
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
    name = type(exc).__name__
    return {
        "CompactionRefused": "compaction_refused",
        "CompactionInterrupted": "compaction_interrupted",
        "SessionBusy": "session_busy",
        "LeaseLost": "lease_lost",
    }.get(name, getattr(exc, "code", None) or "compaction_failed")


def _client_for(session: Session, fault_injection: Mapping[str, Any] | None) -> ModelClient:
    config = settings_builder.provider_config(
        provider=session.provider, policy=session.policy,
        fault_injection=dict(session.fault_injection or {}) if fault_injection is None else dict(fault_injection),
    )
    return build_client(config)


def _turn_config(session: Session, **overrides: Any) -> TurnConfig:
    config = TurnConfig(
        base_instructions=session.base_instructions,
        stream_max_retries=settings_builder.stream_max_retries(provider=session.provider, policy=session.policy),
        reasoning=dict(settings_builder.DEFAULT_REASONING) if session.provider.supports_reasoning else None,
        request_tools=list(session.tools or []),
        parallel_tool_calls=session.parallel_tool_calls,
        supports_images=session.provider.supports_images,
    )
    for key, value in overrides.items():
        if value is not None:
            setattr(config, key, value)
    return config


async def arun_turn(
    *,
    session_id: int,
    user_input: str | list[dict[str, Any]],
    tools: Mapping[str, Any] | None = None,
    tool_rng: Callable[[str], random.Random] | None = None,
    turn_id: str | None = None,
    actor=None,
    lease: locks.Lease | None = None,
    client: ModelClient | None = None,
    fault_injection: Mapping[str, Any] | None = None,
    initial_context: Callable[[Session, TurnState], list[Item]] | None = None,
    turn_context: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    session: Session | None = None,
) -> TurnResult:
    """Run one turn of a session (spec §2.4) and return what happened.

    Takes the session's lease unless `lease` (already held, e.g. by a simulator step) is given; raises SessionBusy
    when another turn, compaction or rollback holds it, Session.DoesNotExist for an unknown session and
    TurnInputError for an empty input, all before anything is recorded. Provider and compaction failures do not
    raise: they end the turn with an `error` line and `status="failed"`. `tools` are simulated tools by name (none
    for API turns); `fault_injection` overrides the session's for the turn's own requests. `session`: with `lease`,
    the session (provider and policy loaded) the lease holder already read, so the turn does not read it again.
    """
    validate_user_input(user_input)
    settings_change = validate_settings_change(settings)
    turn_id = turn_id or str(uuid7())
    run = {"session_id": session_id, "user_input": user_input, "tools": tools, "tool_rng": tool_rng,
           "turn_id": turn_id, "actor": actor, "fault_injection": fault_injection,
           "initial_context": initial_context, "turn_context": turn_context, "settings_change": settings_change,
           "sleep": sleep}
    if lease is not None:
        if session is None or session.pk != session_id:
            session = await sync_to_async(selectors.get_session)(session_id=session_id)
        return await _run_turn(session=session, lease=lease, client=client, own_lease=False, **run)
    # An own lease is taken by the turn's first write, not in a transaction and a trip of its own: the session is
    # the copy this process kept from the session's last turn, else one trip reads it (and builds the client);
    # the loop decides how the turn starts, and its first lines take the lease. A session found leased, written or
    # reconfigured since that read wrote nothing: the lease is then taken the usual way (busy, read-only, an
    # expired holder's takeover) and the turn starts over.
    kept = idle_sessions.take(session_id)
    if kept is not None:
        # Building the client reads no database (the provider row is loaded): no trip to the database thread.
        session, stamp = kept
        model = None if client is not None else _client_for(session, fault_injection)
    else:
        session, stamp, model = await sync_to_async(_load_for_turn)(
            session_id=session_id, fault_injection=fault_injection, build_client=client is None)
    if not session.lease_holder:
        try:
            # A kept copy's configuration may have changed since an earlier turn read it: the first write checks;
            # one read by this turn a moment ago needs no second read.
            return await _run_turn(session=session, lease=locks.planned(session_id=session_id, purpose="turn"),
                                   client=client or model, own_client=client is None, own_lease=True,
                                   take_lease_in_first_write=True, stamp=stamp, check_stamp=kept is not None,
                                   keep=True, **run)
        except locks.LeaseNotFree:
            pass
    lease, session, stamp = await sync_to_async(_acquire_and_load)(session_id=session_id)
    return await _run_turn(session=session, lease=lease, client=client, own_lease=True, stamp=stamp, keep=True,
                           **run)


async def _run_turn(
    *, session: Session, lease: locks.Lease, client: ModelClient | None, own_lease: bool,
    own_client: bool | None = None, take_lease_in_first_write: bool = False,
    stamp: selectors.ConfigStamp | None = None, check_stamp: bool = False, keep: bool = False, session_id: int,
    user_input: str | list[dict[str, Any]], tools: Mapping[str, Any] | None,
    tool_rng: Callable[[str], random.Random] | None, turn_id: str, actor, fault_injection: Mapping[str, Any] | None,
    initial_context: Callable[[Session, TurnState], list[Item]] | None, turn_context: Mapping[str, Any] | None,
    settings_change: dict[str, Any], sleep: Callable[[float], Awaitable[None]] | None,
) -> TurnResult:
    """One turn on `session` under `lease` (held, or with `take_lease_in_first_write` taken by the first write);
    an own lease is released by the turn's last write, or here when the turn ended another way. `client`: the
    model client, closed here when `own_client` (default: when none was given and one is built here). `keep`:
    a turn whose last write gave the lease back leaves its session in `idle_sessions`, with `stamp`, which the
    write that takes the lease checks when `check_stamp`."""
    port = None
    model = client
    if own_client is None:
        own_client = client is None
    try:
        config = _turn_config(
            session, tools=dict(tools) if tools else None, tool_rng=tool_rng, sleep=sleep,
            turn_context=dict(turn_context) if turn_context else None,
            settings_change=settings_change or None,
        )
        port = SessionTurnPort(session_id=session_id, turn_id=turn_id, lease=lease, actor=actor,
                               initial_context=initial_context, session=session,
                               release_lease_on_complete=own_lease,
                               take_lease_in_first_write=take_lease_in_first_write,
                               stamp=stamp if check_stamp else None)
        if model is None:
            model = await sync_to_async(_client_for)(session, fault_injection)
        # Renewed in the background too: one provider call or stream may outlast the lease's TTL.
        async with locks.keep_renewed(lease):
            result = await run_turn_loop(port=port, client=model, user_input=user_input, turn_id=turn_id,
                                         config=config)
        result.first_seq = port.first_seq or 0
        result.last_seq = port.last_seq
        if not port.alerts_recorded:
            await sync_to_async(record_turn_alerts)(session_id=session_id, first_seq=result.first_seq,
                                                    last_seq=result.last_seq)
        if keep and stamp is not None and port.lease_released and port.kept_session is not None:
            idle_sessions.put(port.kept_session, stamp)
        return result
    finally:
        if own_client and model is not None:
            await _close(model)
        if own_lease and not (port is not None and (port.lease_released or not port.lease_held)):
            await sync_to_async(locks.release)(lease)


async def _close(model: ModelClient) -> None:
    if hasattr(model, "aclose"):
        await model.aclose()


def _load_for_turn(*, session_id: int, fault_injection: Mapping[str, Any] | None,
                   build_client: bool) -> tuple[Session, selectors.ConfigStamp, ModelClient | None]:
    """The session a turn works on (with its provider and policy) and the stamp of its configuration, read without
    a lease, and its model client unless the session is leased (then `lease.acquire` decides first: busy, or an
    expired holder's takeover); SessionReadOnly for a session that follows a Codex rollout file."""
    session, stamp = selectors.get_session_stamped(session_id=session_id)
    if session.source in locks.READ_ONLY_SOURCES:
        raise locks.SessionReadOnly(session_id=session_id)
    if not build_client or session.lease_holder:
        return session, stamp, None
    return session, stamp, _client_for(session, fault_injection)


def record_turn_alerts(*, session_id: int, first_seq: int, last_seq: int) -> None:
    """Feed the finished turn to the alert watch (sessions_app.compactions.alerts); an alert never fails a turn."""
    try:
        record_turn(session_id=session_id, first_seq=first_seq, last_seq=last_seq)
    except Exception:
        logger.exception("alert check after a turn of session %s failed", session_id)


def _acquire_and_load(*, session_id: int) -> tuple[locks.Lease, Session, selectors.ConfigStamp]:
    lease = locks.acquire(session_id=session_id, purpose="turn")
    try:
        return lease, *selectors.get_session_stamped(session_id=session_id)
    except BaseException:
        locks.release(lease)
        raise


def run_turn(**kwargs: Any) -> TurnResult:
    """`arun_turn` for synchronous callers (views, Celery tasks, management commands)."""
    return async_to_sync(arun_turn)(**kwargs)


def turn_items(*, session_id: int, first_seq: int, last_seq: int) -> list[Item]:
    """The items a turn appended (its `response_item` lines), in order."""
    if not first_seq:
        return []
    return list(
        RolloutLine.objects.filter(session_id=session_id, kind=RESPONSE_ITEM, seq__gte=first_seq, seq__lte=last_seq)
        .order_by("seq")
        .values_list("payload", flat=True)
    )


def new_turn_id() -> str:
    return str(uuid7())


__all__ = [
    "HistoryCache", "SeqKeyedCache", "SessionTurnPort", "TurnContextCache", "TurnInputError", "arun_turn", "history_cache",
    "model_limits", "new_turn_id", "previous_turn_context", "run_turn", "turn_context_cache", "turn_items",
    "validate_user_input",
]
