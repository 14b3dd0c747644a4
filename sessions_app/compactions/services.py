"""Compacting a session: lock it, snapshot it, run the pure engine, install the result atomically (issue 4).

One compaction, end to end:
1. take the session's lease (or use the caller's: the turn loop already holds it); a lease taken over from a dead
   holder has marked that holder's attempts still `running` as `interrupted` (sessions_app.rollout.lease);
2. snapshot the cached projection in one transaction (items with their stored token counts, the meter, the window,
   the rollout seq) and create the `running` CompactionAttempt row, so a crash is visible;
3. run `compaction_app.engine.compactor.run_compaction`, forwarding its events as transient live events and
   renewing the lease while the model works;
4. success: in ONE transaction (after `lease.check()`), append `compacted` (+ `turn_context` when a baseline was
   installed) and the durable event lines (spec §8.1, §11), then the Compaction, attempt, hook-run and audit rows.
   Items appended to the rollout after the snapshot follow the replacement history;
5. failure: the history is untouched; the attempt is finished as failed/interrupted, an `event_msg` line records
   the error, and the audit log says who tried.

`do_compact_session` is the synchronous entry point (API, background task); `acompact_session` the async one (the
turn loop). Both run the same code.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings as django_settings
from django.db import transaction
from django.utils import timezone
from uuid6 import uuid7

from compaction_app import records
from compaction_app.audit import record_audit
from compaction_app.engine.analytics import AttemptRecord
from compaction_app.engine.compactor import (
    CompactionOutcome,
    CompactionRequest,
    Effects,
    HistorySnapshot,
    needs_client,
    run_compaction,
)
from compaction_app.engine.errors import CompactionConfigError
from compaction_app.engine.events import Event, Warning
from compaction_app.engine.hooks import HookRunner, HookSpec
from compaction_app.engine.prompts import remote_error_text
from compaction_app.engine.select import select_strategy
from compaction_app.engine.settings import CompactionSettings
from compaction_app.engine.thresholds import ModelLimits
from compaction_app.engine.tokens import counter
from compaction_app.engine.vocabulary import IMPLEMENTATIONS, MODEL_SWITCH_REASONS, Strategy, code_label
from compaction_app.engine.windows import WindowState, new_window_id
from compaction_app.models import AuditEntry, Compaction, CompactionAttempt
from compaction_app.providers.config import ProviderConfig
from compaction_app.providers.factory import build_client
from compactweb import db_outage
from compactweb.domain_errors import Conflict, Invalid, UpstreamFailed
from sessions_app.codex_rollout.parse import EXTRA_INSTRUCTIONS
from sessions_app.compactions import alerts
from sessions_app.compactions.retention import retention_fields, session_carried_facts, session_pins
from sessions_app.compactions.settings_builder import (
    FaultInjectionError,
    compaction_settings,
    hook_runner_limits,
    hook_specs,
    prompt_names,
    prompt_record,
    provider_config,
    render_initial_context,
    switched_model_settings,
)
from sessions_app.compactions.usage_lines import usage_lines
from sessions_app.models import LiveItem, RolloutLine, Session
from sessions_app.rollout import projection as p
from sessions_app.rollout.events import publish_transient
from sessions_app.rollout.lease import (
    Lease,
    LeaseLost,
    SessionBusy,
    acquire,
    keep_renewed,
    lease_ttl,
    release,
)
from sessions_app.rollout.locks import lock_session
from sessions_app.rollout.services import NewLine, append_rollout_lines, estimate_line
from sessions_app.rollout.validation import ItemValidationError

logger = logging.getLogger(__name__)

LEASE_PURPOSE = "compaction"
LEASE_LOST_KIND = "lease_lost"
INTERNAL_ERROR_KIND = "internal_error"
BAD_OUTPUT_KIND = "bad_response"
# A compaction that left more history than its caller allowed (CompactionAsk.max_history_tokens): not installed.
SHORT_OF_TARGET_KIND = "short_of_target"
DATABASE_UNAVAILABLE_KIND = "database_unavailable"

Sleep = Callable[[float], Awaitable[None]]


def backoff_sleep() -> Sleep:
    """The sleep of the engine's and the provider client's retry backoff when the caller injects none: real time
    times settings.COMPACTWEB_RETRY_BACKOFF_SCALE (1 in a deployment; 0 skips the waits)."""
    scale = django_settings.COMPACTWEB_RETRY_BACKOFF_SCALE
    if scale == 1:
        return asyncio.sleep

    async def scaled(seconds: float) -> None:
        await asyncio.sleep(seconds * scale)

    return scaled

__all__ = [
    "CompactionFailed",
    "CompactionInterrupted",
    "CompactionAsk",
    "CompactionRefused",
    "SessionBusy",
    "acompact_session",
    "do_compact_session",
]


class CompactionRefused(Invalid, ValueError):
    """The request cannot run with this session's configuration (engine CompactionConfigError, bad fault
    injection, unknown trigger/phase/strategy). Nothing was recorded or changed."""

    code = "compaction_refused"


class CompactionFailed(UpstreamFailed):
    """The provider or the engine failed; the history is unchanged. `attempt` is the failed CompactionAttempt;
    `code` (the error kind) is what the API and callers such as the turn loop report; `http_status` is the
    provider's, when it answered with one."""

    def __init__(self, *, attempt: CompactionAttempt, kind: str, message: str, http_status: int | None = None):
        self.attempt = attempt
        self.kind = kind
        self.http_status = http_status
        super().__init__(message, code=kind, attempt_id=attempt.pk,
                         **({"http_status": http_status} if http_status is not None else {}))


class CompactionInterrupted(Conflict):
    """A PreCompact hook stopped the compaction (spec §7); nothing changed. `attempt` has status interrupted."""

    code = "interrupted"

    def __init__(self, *, attempt: CompactionAttempt, stop_reason: str | None):
        self.attempt = attempt
        self.stop_reason = stop_reason
        super().__init__(stop_reason or "PreCompact hook stopped execution", attempt_id=attempt.pk)
        self.message = f"a PreCompact hook stopped the compaction: {stop_reason or 'no reason given'}"


@dataclass(frozen=True)
class _Plan:
    """Everything the engine run needs, read from the database in one transaction."""

    session_id: int
    snapshot: HistorySnapshot
    snapshot_seq: int
    settings: CompactionSettings
    fallback_settings: CompactionSettings | None
    request: CompactionRequest
    strategy: Strategy
    client_config: ProviderConfig
    hooks: list[HookSpec]
    hook_ids: dict[str, int]
    attempt_id: int
    item_id: str
    new_window_id: str
    instructions: str
    model: str
    flag_below: float | None = None
    prompt_names: dict[str, str] = field(default_factory=dict)  # settings_builder.prompt_names, read at plan time


@dataclass(frozen=True, kw_only=True)
class CompactionAsk:
    """What a caller asks of one compaction: the trigger, reason, phase and strategy the engine checks, local
    summarization's extra `instructions`, the model to compact with (`compact_with`: the previous model of a
    model_downshift or comp_hash_changed, with its own window) and the turn it belongs to (a new id when none)."""

    trigger: str = "manual"
    reason: str | None = None
    phase: str | None = None
    strategy: str | None = None
    instructions: str = ""
    compact_with: ModelLimits | None = None
    turn_id: str | None = None
    # At most this many tokens of history may be left (the replacement, counted with the policy's counter): a
    # compaction that leaves more is not installed and fails with SHORT_OF_TARGET_KIND, so that a caller that
    # needs room (the gateway: what the client's limit leaves) can do something else instead. None: any result.
    max_history_tokens: int | None = None


MANUAL = CompactionAsk()


def _refuse(message: str) -> CompactionRefused:
    return CompactionRefused(message)


def _validate(settings: CompactionSettings, request: CompactionRequest, instructions: str) -> Strategy:
    """The engine's up-front checks (run_compaction raises the same), run before any row is written."""
    strategy = select_strategy(settings, request.strategy)
    if instructions.strip() and strategy is not Strategy.LOCAL:
        raise CompactionConfigError(
            "extra instructions apply to local summarization only: remote and token-budget compaction send no "
            "prompt"
        )
    return strategy


def _plan(*, lease: Lease, session_id: int, ask: CompactionAsk) -> _Plan:
    instructions = ask.instructions or ""
    compact_with_model = ask.compact_with.slug if ask.compact_with is not None else None
    compact_with_window = ask.compact_with.context_window if ask.compact_with is not None else None
    with transaction.atomic():
        session = lock_session(session_id=session_id, with_config=True)
        provider, policy = session.provider, session.policy
        try:
            request = CompactionRequest(
                trigger=ask.trigger, phase=ask.phase, reason=ask.reason, strategy=ask.strategy,
                extra_instructions=instructions or None,
            )
        except ValueError as exc:  # CompactionConfigError, or an unknown trigger / phase / reason value
            raise _refuse(str(exc)) from None
        thread_id = str(session.thread_id)
        # spec §2.4 / §6.4: model_downshift and comp_hash_changed compact with the previous model (the one of the
        # latest turn) and may fall back to the current one.
        switching = str(request.reason) in MODEL_SWITCH_REASONS
        model = compact_with_model or (session.model if switching and session.model else provider.model)
        try:
            settings = compaction_settings(
                provider=provider, policy=policy, model=model, thread_id=thread_id,
                base_instructions=session.base_instructions,
                # spec §4.2 step 3, §13, §16: remote requests carry the tools a normal turn's request carries.
                tools=tuple(session.tools or ()), parallel_tool_calls=session.parallel_tool_calls,
            )
            chosen = _validate(settings, request, instructions)
            client_config = provider_config(
                provider=provider, policy=policy, fault_injection=session.fault_injection, model=model
            )
            if compact_with_window is not None and compact_with_window != provider.context_window:
                # The previous model compacts within its own (larger) window, which the session's current provider
                # row no longer describes (spec §2.4.1a).
                settings = replace(settings, context_window=compact_with_window)
                client_config = replace(client_config, context_window=compact_with_window)
        except (ValueError, FaultInjectionError) as exc:
            raise _refuse(str(exc)) from None
        fallback = None
        if switching and model != provider.model:
            fallback = switched_model_settings(settings, model=provider.model, context_window=provider.context_window)
        hooks = list(policy.hooks.all())
        entries = list(
            LiveItem.objects.filter(session_id=session_id).order_by("position").values_list("item", "tokens")
        )
        window = WindowState(
            number=session.window_number, window_id=session.window_id, first_window_id=session.first_window_id,
            previous_window_id=session.previous_window_id or None,
        )
        next_window_id = new_window_id()
        snapshot = HistorySnapshot(
            items=[item for item, _ in entries],
            item_tokens=[tokens for _, tokens in entries],
            active_tokens=session.tokens_in_window,
            window=window,
            turn_id=ask.turn_id or str(uuid7()),
            initial_context=render_initial_context(
                list(session.initial_context or []), thread_id=thread_id, first_window_id=window.first_window_id,
                current_window_id=next_window_id, previous_window_id=window.window_id,
            ),
            prefill=session.meter_prefill,
            pins=session_pins(session_id=session_id),
            carried=session_carried_facts(session_id=session_id),
            session_id=thread_id,
            transcript_path=f"/api/v1/sessions/{session_id}/rollout",
        )
        item_id = str(uuid7())
        attempt = records.start_attempt(
            session=session, item_id=item_id, turn_id=snapshot.turn_id, trigger=str(request.trigger),
            reason=str(request.reason), implementation=_implementation(chosen), phase=str(request.phase),
            strategy=chosen.value, tokens_before=snapshot.active_tokens,
        )
    return _Plan(
        session_id=session_id, snapshot=snapshot, snapshot_seq=session.last_seq, settings=settings,
        fallback_settings=fallback, request=request, strategy=chosen, client_config=client_config,
        hooks=hook_specs(hooks=hooks), hook_ids={h.name: h.pk for h in hooks}, attempt_id=attempt.pk,
        item_id=item_id, new_window_id=next_window_id, instructions=instructions, model=session.model,
        flag_below=policy.retention_flag_below, prompt_names=prompt_names(policy=policy),
    )


def _implementation(strategy: Strategy) -> str:
    return IMPLEMENTATIONS[strategy].value


class _EventForwarder:
    """Publishes engine events as transient live events, in order, off the event loop (publishing is sync)."""

    def __init__(self, *, session_id: int, after_seq: int, attempt_id: int, item_id: str) -> None:
        self.session_id, self.after_seq = session_id, after_seq
        self.base = {"attempt_id": attempt_id, "item_id": item_id}
        self._queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()
        self._task = asyncio.create_task(self._drain())

    def send(self, kind: str, detail: dict[str, Any]) -> None:
        self._queue.put_nowait((kind, {**self.base, **detail}))

    def emit(self, event: Event) -> None:
        self.send(f"compaction.{event.type}", event.to_dict())

    async def _drain(self) -> None:
        publish = sync_to_async(publish_transient, thread_sensitive=False)
        while (message := await self._queue.get()) is not None:
            kind, detail = message
            try:
                await publish(session_id=self.session_id, after_seq=self.after_seq, kind=kind, detail=detail)
            except Exception:  # a lost progress event is recovered by the client's re-sync
                logger.exception("could not publish %s", kind)

    async def close(self) -> None:
        self._queue.put_nowait(None)
        await self._task


async def _run_engine(plan: _Plan, lease: Lease, sleep: Sleep) -> CompactionOutcome:
    calls_model = needs_client(plan.strategy, plan.settings)
    client = build_client(plan.client_config, sleep=sleep) if calls_model else None
    events = _EventForwarder(session_id=plan.session_id, after_seq=plan.snapshot_seq, attempt_id=plan.attempt_id,
                             item_id=plan.item_id)
    events.send("compaction.started", {
        "trigger": str(plan.request.trigger), "reason": str(plan.request.reason), "phase": str(plan.request.phase),
        "strategy": plan.strategy.value, "implementation": _implementation(plan.strategy),
        "tokens_before": plan.snapshot.active_tokens,
    })
    try:
        async with keep_renewed(lease):
            return await run_compaction(
                snapshot=plan.snapshot, settings=plan.settings, request=plan.request, client=client,
                hooks=HookRunner(plan.hooks, **hook_runner_limits()), emit=events.emit,
                fallback_settings=plan.fallback_settings,
                effects=Effects(sleep=sleep, new_id=lambda: plan.new_window_id, new_item_id=lambda: plan.item_id),
            )
    finally:
        await events.close()
        if client is not None and hasattr(client, "aclose"):
            await client.aclose()


def _attempt_records(outcome: CompactionOutcome) -> list[AttemptRecord]:
    # The engine reports one record per compaction (docs/compaction.md); the first updates the running row.
    return outcome.attempts


def _install(plan: _Plan, outcome: CompactionOutcome, lease: Lease, actor) -> Compaction:
    """spec §8.1: one transaction: `compacted`, then `turn_context` when a baseline was installed, then the
    durable events (estimate token_count, context_compacted, the local Heads-up warning), then the rows."""
    with transaction.atomic():
        lease.check()
        session = lock_session(session_id=plan.session_id)
        late = list(RolloutLine.objects.filter(session_id=plan.session_id, seq__gt=plan.snapshot_seq).order_by("seq"))
        replaced = [line.seq for line in late if line.kind in p.HISTORY_INSTALLING_KINDS]
        if replaced:
            # Only a writer that ignored the lease can do this; installing would silently drop its change.
            raise LeaseLost(f"the history of session {plan.session_id} was replaced (line {replaced[0]}) while "
                            "the compaction ran")
        late_items = [line.payload for line in late if line.kind == p.RESPONSE_ITEM]
        compacted = outcome.compacted_item()
        compacted["replacement_history"] = [*compacted["replacement_history"], *late_items]
        extra = plan.instructions.strip()
        if extra:  # what the prompt was given (compaction_app.engine.strategies.local), kept with the window it made
            compacted[EXTRA_INSTRUCTIONS] = extra
        lines = [NewLine(p.COMPACTED, compacted)]
        if outcome.reference_context_set:
            lines.append(NewLine(p.TURN_CONTEXT, {
                "turn_id": plan.snapshot.turn_id, "model": session.model or outcome.model, "source": "compaction",
                "compaction_item_id": outcome.item_id,
            }))
        lines += usage_lines(outcome)  # what it cost, so an export and re-import keeps its net
        lines.append(estimate_line())
        lines.append(NewLine(p.EVENT_MSG, {"type": "context_compacted", "item_id": outcome.item_id}))
        lines += [NewLine(p.EVENT_MSG, {"type": "warning", "message": e.message})
                  for e in outcome.events if isinstance(e, Warning)]
        rows = append_rollout_lines(session=session, lines=lines, actor=_actor(actor))
        session.refresh_from_db()
        compaction = records.create_compaction(
            session=session, rollout_seq=rows[0].seq, trigger=str(outcome.trigger), reason=str(outcome.reason),
            phase=str(outcome.phase), implementation=str(outcome.implementation), strategy=outcome.strategy.value,
            summary=outcome.summary_text or "", tokens_before=outcome.tokens_before,
            tokens_after=session.tokens_in_window, window_number=outcome.window.number,
            window_id=outcome.window.window_id, previous_window_id=outcome.window.previous_window_id or "",
            first_window_id=outcome.window.first_window_id, item_id=outcome.item_id,
            injection=str(outcome.injection), extra_instructions=extra,
            **prompt_record(names=plan.prompt_names, text=outcome.prompt),
            **retention_fields(outcome, flag_below=plan.flag_below),
        )
        records.finish_attempt(attempt_id=plan.attempt_id, record=_attempt_records(outcome)[0], compaction=compaction)
        records.record_hook_runs(attempt_id=plan.attempt_id, runs=outcome.hook_runs, hook_ids=plan.hook_ids)
        alerts.record_compaction(compaction=compaction, before=plan.snapshot.items,
                                 after=compacted["replacement_history"])
        record_audit(
            actor=actor, action=AuditEntry.Action.COMPACTION, session=session, compaction=compaction,
            reason=plan.instructions or str(outcome.trigger),
            detail={
                "attempt_id": plan.attempt_id, "strategy": outcome.strategy.value,
                "implementation": str(outcome.implementation), "reason": str(outcome.reason),
                "phase": str(outcome.phase), "model": outcome.model, "model_fallback": outcome.model_fallback,
                "tokens_before": outcome.tokens_before, "tokens_after": compaction.tokens_after,
                "late_items": len(late_items), "post_compact_stopped": outcome.post_compact_stopped,
            },
        )
    return compaction


def _record_failure(
    plan: _Plan, *, actor, kind: str, message: str, http_status: int | None = None,
    outcome: CompactionOutcome | None = None,
) -> CompactionAttempt:
    """Finish the attempt as failed / interrupted and write the durable record; the history is not touched
    (event_msg lines other than token_count change nothing in the projection)."""
    interrupted = outcome is not None and str(outcome.status) == CompactionAttempt.Status.INTERRUPTED
    with transaction.atomic():
        session = Session.objects.select_related("provider").get(pk=plan.session_id)
        lines = []
        if outcome is not None:
            records.finish_attempt(attempt_id=plan.attempt_id, record=_attempt_records(outcome)[0])
            records.record_hook_runs(attempt_id=plan.attempt_id, runs=outcome.hook_runs, hook_ids=plan.hook_ids)
            pinned = outcome.error.active_tokens_after if outcome.error is not None else None
            if pinned is not None:
                # spec §3.2 / §6.1: context window exceeded with one item left pins the last usage to the window.
                lines.append(NewLine(p.EVENT_MSG, {
                    "type": "token_count", "pinned_full": True,
                    "info": {"last_token_usage": {"total_tokens": pinned},
                             "model_context_window": plan.settings.usable_window},
                }))
        else:
            records.fail_attempt(attempt_id=plan.attempt_id, kind=kind, message=message, http_status=http_status)
        detail = {"attempt_id": plan.attempt_id, "item_id": plan.item_id, "message": message}
        if interrupted:
            lines.append(NewLine(p.EVENT_MSG, {"type": "compaction_interrupted", **detail}))
        else:
            lines.append(NewLine(p.EVENT_MSG, {"type": "error", **detail, "codex_error_info": kind,
                                               "http_status": http_status}))
        append_rollout_lines(session=session, lines=lines, actor=_actor(actor))
        record_audit(
            actor=actor, action=AuditEntry.Action.COMPACTION_FAILED, session=session,
            reason=plan.instructions or str(plan.request.trigger),
            detail={"attempt_id": plan.attempt_id, "status": "interrupted" if interrupted else "failed",
                    "error_kind": kind, "message": message, "http_status": http_status,
                    "strategy": plan.strategy.value},
        )
        if not interrupted:
            alerts.record_attempt_failed(session_id=plan.session_id, attempt_id=plan.attempt_id)
    return CompactionAttempt.objects.get(pk=plan.attempt_id)


def _short_of_target(plan: _Plan, outcome: CompactionOutcome, allowed: int | None) -> str:
    """Why the compaction is not installed when it left more history than `allowed` tokens, else ""."""
    if allowed is None:
        return ""
    count = counter(plan.settings.token_counter)
    left = sum(count.count_item(item) for item in outcome.replacement_history or [])
    if left <= allowed:
        return ""
    return (f"{code_label(plan.strategy.value)} left {left:,} tokens of history, more than the {allowed:,} allowed; "
            "nothing was installed")


def _actor(actor):
    """Anonymous users and missing actors are recorded as "system"."""
    if actor is None or not getattr(actor, "is_authenticated", False):
        return None
    return actor


async def acompact_session(
    *,
    session_id: int,
    ask: CompactionAsk = MANUAL,
    actor=None,
    lease: Lease | None = None,
    sleep: Sleep | None = None,
) -> Compaction:
    """Compact one session (see the module docstring). `sleep` is the retry backoff's sleep (default
    `backoff_sleep()`). Raises Session.DoesNotExist, SessionBusy,
    CompactionRefused, CompactionInterrupted, CompactionFailed or LeaseLost; returns the installed Compaction."""
    own_lease = lease is None
    if lease is None:
        lease = await sync_to_async(acquire)(session_id=session_id, purpose=LEASE_PURPOSE)
    plan = None
    try:
        plan = await sync_to_async(db_outage.retry_on_conflict)(
            lambda: _plan(lease=lease, session_id=session_id, ask=ask))
        try:
            outcome = await _run_engine(plan, lease, sleep if sleep is not None else backoff_sleep())
        except asyncio.CancelledError:  # the caller (e.g. a stopped turn) gave up; nothing was installed
            await asyncio.shield(sync_to_async(records.cancel_attempt)(attempt_id=plan.attempt_id))
            raise
        except CompactionConfigError as exc:  # the engine's own up-front checks; nothing ran
            await sync_to_async(records.discard_attempt)(attempt_id=plan.attempt_id)
            raise CompactionRefused(str(exc)) from None
        except Exception as exc:
            logger.exception("compaction of session %s crashed", session_id)
            attempt = await sync_to_async(_record_failure)(
                plan, actor=actor, kind=INTERNAL_ERROR_KIND, message=f"{type(exc).__name__}: {exc}"
            )
            raise CompactionFailed(attempt=attempt, kind=INTERNAL_ERROR_KIND, message=str(exc)) from exc
        if not outcome.ok:
            error = outcome.error
            assert error is not None
            # Codex's wording for the user: a remote failure is "Error running remote compact task: <cause>"
            # (spec §4 step 6, §11); the attempt keeps the bare cause as its error_message.
            interrupted = str(outcome.status) == CompactionAttempt.Status.INTERRUPTED
            text = remote_error_text(error.message) if plan.strategy.is_remote and not interrupted else error.message
            attempt = await sync_to_async(_record_failure)(
                plan, actor=actor, kind=error.kind, message=text, http_status=error.http_status,
                outcome=outcome,
            )
            if attempt.status == CompactionAttempt.Status.INTERRUPTED:
                raise CompactionInterrupted(attempt=attempt, stop_reason=outcome.stop_reason or error.message)
            raise CompactionFailed(attempt=attempt, kind=error.kind, message=text,
                                   http_status=error.http_status)
        short = _short_of_target(plan, outcome, ask.max_history_tokens)
        if short:
            attempt = await sync_to_async(_record_failure)(plan, actor=actor, kind=SHORT_OF_TARGET_KIND, message=short)
            raise CompactionFailed(attempt=attempt, kind=SHORT_OF_TARGET_KIND, message=short)
        try:
            return await sync_to_async(db_outage.retry_on_conflict)(lambda: _install(plan, outcome, lease, actor))
        except LeaseLost as exc:
            await sync_to_async(_record_failure)(plan, actor=actor, kind=LEASE_LOST_KIND, message=str(exc))
            raise
        except ItemValidationError as exc:  # the provider returned items the rollout cannot store
            message = f"the compacted history cannot be stored: {exc}"
            attempt = await sync_to_async(_record_failure)(plan, actor=actor, kind=BAD_OUTPUT_KIND, message=message)
            raise CompactionFailed(attempt=attempt, kind=BAD_OUTPUT_KIND, message=message) from exc
    except Exception as exc:
        # the database error itself (a failure already recorded is raised as CompactionFailed, maybe from one)
        if plan is None or not isinstance(exc, db_outage.UNAVAILABLE):
            raise
        if not await sync_to_async(_record_failure_after_outage)(plan, actor=actor, exc=exc):
            own_lease = False  # left to expire: the lease's reaper then ends the attempt as interrupted
        raise
    finally:
        if own_lease:
            await sync_to_async(release)(lease)


def _record_failure_after_outage(plan: _Plan, *, actor, exc: BaseException) -> bool:
    """The database went away or refused a write (a full or read-only SQLite file, a PostgreSQL restart) while the
    attempt ran or was being recorded: nothing was installed (the install is one transaction). Once the database
    takes writes again (waited for up to the lease's TTL) the attempt ends as failed, so it never stays `running`
    with its session free; False when the database did not come back in time (the caller then keeps its lease,
    whose expiry ends the attempt as interrupted)."""
    logger.warning("compaction of session %s stopped: the database is unavailable (%s: %s)", plan.session_id,
                   type(exc).__name__, exc)
    deadline = time.monotonic() + lease_ttl().total_seconds()
    while db_outage.wait_until_writable(deadline=deadline):
        try:
            _record_failure(plan, actor=actor, kind=DATABASE_UNAVAILABLE_KIND,
                            message=f"the database refused the write: {type(exc).__name__}: {exc}")
            return True
        except db_outage.UNAVAILABLE:
            continue
    return False


def do_compact_session(
    *, session_id: int, actor=None, lease: Lease | None = None, sleep: Sleep | None = None, **ask: Any,
) -> Compaction:
    """Synchronous `acompact_session` (for views and background jobs; not callable from a running event loop),
    the `CompactionAsk` given by its fields (`strategy="local"`, ...)."""
    return async_to_sync(acompact_session)(
        session_id=session_id, ask=CompactionAsk(**ask), actor=actor, lease=lease, sleep=sleep,
    )


def lease_is_free(*, session_id: int) -> None:
    """Raise SessionBusy when a live lease holds the session (Session.DoesNotExist when there is none)."""
    row = Session.objects.filter(pk=session_id).values("lease_holder", "lease_purpose", "lease_expires_at").first()
    if row is None:
        raise Session.DoesNotExist(f"no session {session_id}")
    expires = row["lease_expires_at"]
    if row["lease_holder"] and (expires is None or expires >= timezone.now()):
        raise SessionBusy(session_id=session_id, purpose=row["lease_purpose"])
