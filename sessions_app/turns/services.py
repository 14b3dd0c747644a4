"""Turns against the database: running one turn of a session (the loop itself is `sessions_app.turns.loop`).

`arun_turn` takes the session's lease (purpose "turn"), builds the provider client from the session's Provider row
and fault injection (through `sessions_app.compactions.settings_builder`, so a turn and a compaction see the same
settings), and runs the loop through `SessionTurnPort` (sessions_app.turns.port), which appends rollout lines with
`append_rollout_lines` and runs automatic compactions with `sessions_app.compactions.services.acompact_session`
under the same lease. What a turn accepts is checked first (sessions_app.turns.inputs); the per-process caches
that spare a turn its reads are sessions_app.turns.caches.

Per-turn cost does not grow with the history: the checks read the session's cached header (O(1)), appends are O(1)
per line, and the live history a request sends is kept in a per-process cache validated by the session's `last_seq`
(reloaded only after something else, e.g. a compaction, changed the history).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from uuid6 import uuid7

from compaction_app.engine.port import ModelClient
from compaction_app.providers.factory import build_client
from compactweb import metrics
from sessions_app.compactions import settings_builder
from sessions_app.models import Session
from sessions_app.rollout import lease as locks
from sessions_app.rollout import selectors
from sessions_app.turns.caches import idle_sessions
from sessions_app.turns.ends import end_open_turn, why_cut
from sessions_app.turns.inputs import validate_settings_change, validate_user_input
from sessions_app.turns.loop import TurnConfig, TurnResult, run_turn_loop
from sessions_app.turns.port import Holding, SessionTurnPort, record_turn_alerts

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class TurnScript:
    """What a scripted turn (a simulator step) brings beside its input: its simulated tools by name and the random
    source of their outputs, the fault injection of its own requests (instead of the session's), the fields its
    turn_context line carries, and the sleep of its retry backoff. A plain (API) turn has none of these."""

    tools: Mapping[str, Any] | None = None
    tool_rng: Callable[[str], random.Random] | None = None
    fault_injection: Mapping[str, Any] | None = None
    turn_context: Mapping[str, Any] | None = None
    sleep: Callable[[float], Awaitable[None]] | None = None


UNSCRIPTED = TurnScript()


@dataclass(frozen=True)
class TurnRequest:
    """What one turn was asked to do, checked (`arun_turn`'s arguments): handed whole to the run."""

    session_id: int
    user_input: str | list[dict[str, Any]]
    turn_id: str
    settings_change: dict[str, Any]
    actor: Any = None
    script: TurnScript = UNSCRIPTED


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


@metrics.counted(metrics.TURNS, lambda result: result.status)
async def arun_turn(
    *,
    session_id: int,
    user_input: str | list[dict[str, Any]],
    turn_id: str | None = None,
    actor=None,
    settings: Mapping[str, Any] | None = None,
    script: TurnScript = UNSCRIPTED,
    lease: locks.Lease | None = None,
    session: Session | None = None,
    client: ModelClient | None = None,
) -> TurnResult:
    """Run one turn of a session (spec §2.4) and return what happened.

    Takes the session's lease unless `lease` (already held, e.g. by a simulator step) is given; raises SessionBusy
    when another turn, compaction or rollback holds it, Session.DoesNotExist for an unknown session and
    TurnInputError for an empty input, all before anything is recorded. Provider and compaction failures do not
    raise: they end the turn with an `error` line and `status="failed"`. `script`: what a simulator step adds
    (simulated tools, its own fault injection...); an API turn has none. `session`: with `lease`,
    the session (provider and policy loaded) the lease holder already read, so the turn does not read it again.
    """
    validate_user_input(user_input)
    request = TurnRequest(
        session_id=session_id, user_input=user_input, turn_id=turn_id or str(uuid7()),
        settings_change=validate_settings_change(settings), actor=actor, script=script,
    )
    fault_injection = script.fault_injection
    if lease is not None:
        if session is None or session.pk != session_id:
            session = await sync_to_async(selectors.get_session)(session_id=session_id)
        return await _run_turn(request, session=session, holding=Holding(lease=lease, own=False), client=client)
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
            holding = Holding(lease=locks.planned(session_id=session_id, purpose="turn"), own=True,
                              take_lease_in_first_write=True, stamp=stamp, check_stamp=kept is not None, keep=True)
            return await _run_turn(request, session=session, holding=holding, client=client or model,
                                   own_client=client is None)
        except locks.LeaseNotFree:
            pass
    lease, session, stamp = await sync_to_async(_acquire_and_load)(session_id=session_id)
    return await _run_turn(request, session=session, holding=Holding(lease=lease, own=True, stamp=stamp, keep=True),
                           client=client)


async def _run_turn(request: TurnRequest, *, session: Session, holding: Holding, client: ModelClient | None,
                    own_client: bool | None = None) -> TurnResult:
    """One turn on `session`, held as `holding` says. `client`: the model client, closed here when `own_client`
    (default: when none was given and one is built here)."""
    port = None
    model = client
    if own_client is None:
        own_client = client is None
    lease = holding.lease
    cut_left_open = False  # a cut turn whose end the database did not take: its lease must expire, not be given back
    try:
        script = request.script
        config = _turn_config(
            session, tools=dict(script.tools) if script.tools else None, tool_rng=script.tool_rng,
            sleep=script.sleep, turn_context=dict(script.turn_context) if script.turn_context else None,
            settings_change=request.settings_change or None,
        )
        port = SessionTurnPort(session_id=request.session_id, turn_id=request.turn_id, holding=holding,
                               actor=request.actor, session=session)
        if model is None:
            model = await sync_to_async(_client_for)(session, script.fault_injection)
        # Renewed in the background too: one provider call or stream may outlast the lease's TTL.
        try:
            async with locks.keep_renewed(lease):
                result = await run_turn_loop(port=port, client=model, user_input=request.user_input,
                                             turn_id=request.turn_id, config=config)
        except (Exception, asyncio.CancelledError) as exc:
            if port.first_seq is not None and not port.lease_released:
                cut_left_open = not await _end_cut_turn(request.session_id, exc, holder=lease.holder,
                                                        turn_id=request.turn_id)
            raise
        result.first_seq = port.first_seq or 0
        result.last_seq = port.last_seq
        if not port.alerts_recorded:
            await sync_to_async(record_turn_alerts)(session_id=request.session_id, first_seq=result.first_seq,
                                                    last_seq=result.last_seq)
        if holding.keep and holding.stamp is not None and port.lease_released and port.kept_session is not None:
            idle_sessions.put(port.kept_session, holding.stamp)
        return result
    finally:
        if own_client and model is not None:
            await _close(model)
        # A lease given back free leaves nobody to end a turn left open: only the taker of an expired lease does.
        given_up = port is not None and (port.lease_released or not port.lease_held)
        if holding.own and not cut_left_open and not given_up:
            await sync_to_async(locks.release)(lease)


async def _end_cut_turn(session_id: int, exc: BaseException, *, holder: str, turn_id: str) -> bool:
    """The turn raised after its first lines were written: end it now (`turns/ends`) if the lease is still ours
    (a taker of the lease ended it already, and the open turn would then be the taker's). When the database does
    not take that write either, the simulator step ends it once the database is back, or the next holder of the
    lease does; False then, and the caller leaves its lease to expire."""
    try:
        await sync_to_async(end_open_turn)(session_id=session_id, why=why_cut(exc), holder=holder, turn_id=turn_id)
    except Exception:
        logger.warning("could not end the cut turn of session %s now; the next holder of its lease will",
                       session_id, exc_info=True)
        return False
    return True


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

