"""compactweb mode (issue 29): the gateway answers Codex's compaction itself, with the route's policy.

The compaction runs through the same service as any compactweb session (`sessions_app.compactions.services`):
the policy's strategy (local summarisation with the upstream model, observation masking, pins, retention
probes), its hooks, the attempt and Compaction rows, the atomic install. Codex gets, in the shape of the endpoint
it called, one `compaction` item whose `encrypted_content` is a handle (`wire.new_handle`); the handle is stored
with the replacement history, and when the item comes back in a later request the gateway puts the replacement
in its place before forwarding (`expanded_input`), so the upstream sees a real history. A handle the gateway does
not know is refused (`UnknownHandle`, 400), never forwarded.

A handle belongs to the one gateway session it was issued in, and so to one caller (the route and the key, a
route's or a user's): it is found only by the session the request itself belongs to (`Owner`: route, key and the
Codex session's group). The same handle sent in any other Codex session, with another key, by another user or on
another route is unknown there, so nothing of its session reaches anyone else's upstream request or record.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Sum

from compaction_app.engine.items import is_real_user_message
from compaction_app.engine.select import select_strategy
from compaction_app.engine.strategies.masking import DEFAULT_TARGET_PERCENT, NOTHING_TO_MASK
from compaction_app.engine.thresholds import auto_compact_limit
from compaction_app.engine.vocabulary import Strategy
from gateway_app import lookups, operator, recording, wire
from gateway_app.models import CompactionHandle, GatewayRoute, GatewaySession
from sessions_app.gateway_surface import (
    GATEWAY_NOTICE,
    SHORT_OF_TARGET_KIND,
    CompactionAsk,
    CompactionFailed,
    LiveItem,
    Session,
    acompact_session,
    append_rollout_lines,
    apublish_transient,
    compaction_settings,
    counter_for,
)

logger = logging.getLogger(__name__)

# The share of the room the client's limit leaves for history that a compaction may leave: the policy's target
# (observation masking's own, the one target a compactweb policy has).
TARGET_PERCENT = DEFAULT_TARGET_PERCENT


class UnknownHandle(Exception):
    def __init__(self, handle: str) -> None:
        super().__init__(f"the compaction item's encrypted_content {handle[:12]}… is not a handle this gateway "
                         "issued in this Codex session with this key (or it was removed); start a new Codex "
                         "session or compact again")


@dataclass(frozen=True)
class Owner:
    """Whose request it is: the route, the gateway key (a route's or a user's) and the Codex session's group
    (wire.group_key; empty for a client that names no session, then matched by its history's prefix)."""

    route_id: int
    key_id: int
    group: str


def _replacement_of(*, handle: str, owner: Owner) -> list[dict[str, Any]]:
    rows = CompactionHandle.objects.filter(handle=handle, gateway_session__route_id=owner.route_id,
                                           gateway_session__key_id=owner.key_id)
    if owner.group:
        rows = rows.filter(gateway_session__group_key=owner.group)
    else:  # a client that names no session: only a session grouped by history prefix can be its own
        rows = rows.filter(gateway_session__group_key__startswith=wire.PREFIX_GROUP)
    row = rows.values_list("replacement", flat=True).first()
    if row is None:
        raise UnknownHandle(handle)
    return row


async def expanded_input(*, items: list[dict[str, Any]], owner: Owner) -> list[dict[str, Any]] | None:
    """The input with its newest handle expanded (None when it carries none); every handle must be the owner's."""
    found = wire.handles_in(items)
    if not found:
        return None
    for _, handle in found[:-1]:
        await lookups.run(_replacement_of, handle=handle, owner=owner)
    position, handle = found[-1]
    replacement = await lookups.run(_replacement_of, handle=handle, owner=owner)
    return wire.expand(items, position, replacement, context=is_codex_context)


def is_codex_context(item: dict[str, Any]) -> bool:
    """Codex's own context (spec §1.2, §5.3): a developer message (permissions, skills) or a user message that is no
    user turn (its environment context, AGENTS.md instructions)."""
    return item.get("type") == "message" and (item.get("role") == "developer" or (
        item.get("role") == "user" and not is_real_user_message(item)))


def record_history(*, exchange: recording.Exchange, counted: bool = True) -> GatewaySession:
    """Bring the session's history up to the compaction request's (on the recorder's thread). `counted=False`:
    the request is forwarded afterwards and counted when that exchange is recorded."""
    with transaction.atomic():
        gs = recording.gateway_session_for(exchange)
        recording.count_request(gs, by=int(counted), pending_compaction=None)
        session = Session.objects.select_related("provider", "policy").get(pk=gs.session_id)
        lines, _, _ = recording.history_lines(gs=gs, session=session, exchange=exchange)
        if lines:
            append_rollout_lines(session=session, lines=lines)
    return gs


def _store_handle(*, gs: GatewaySession, compaction_id: int) -> str:
    """A new handle for the installed compaction; the compaction request is counted here, as answered."""
    recording.count_answered(gs)
    handle = wire.new_handle()
    CompactionHandle.objects.create(handle=handle, gateway_session=gs, compaction_id=compaction_id,
                                    replacement=recording.live_history(gs.session_id))
    return handle


async def compact_first(*, gs: GatewaySession, history: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """An operator asked for a compaction at this session's next request: run the route policy's compaction on the
    history the request carries (recorded first) and return (the history to forward instead, the notice for the
    operator). A compaction that fails leaves the history as it was, and the request goes on uncompacted."""
    actor = await lookups.run(operator.compaction_requester, session_id=gs.session_id)
    try:
        done = await acompact_session(session_id=gs.session_id, actor=actor, ask=CompactionAsk(
            trigger="manual", reason="user_requested", phase=recording.phase_of(history)))
    except Exception as exc:  # refused or failed: say so, forward what Codex sent
        notice = await lookups.run(operator.do_record_gateway_compaction, session_id=gs.session_id,
                                   compaction=None, prefix=history, replacement=history, error=str(exc))
        await _announce(gs, notice)
        return history, notice
    replacement = await lookups.run(recording.live_history, session_id=gs.session_id)
    notice = await lookups.run(operator.do_record_gateway_compaction, session_id=gs.session_id, compaction=done,
                               prefix=history, replacement=replacement)
    await _announce(gs, notice)
    return replacement, notice


async def _announce(gs: GatewaySession, notice: str) -> None:
    """Tell the session's page what the gateway did, with the card's state after it: the request it answered is
    no longer shown as pending."""
    state = await lookups.run(operator.gateway_state_of, session_id=gs.session_id)
    await apublish_transient(session_id=gs.session_id, after_seq=0, kind=GATEWAY_NOTICE,
                             detail={"message": notice, "state": state})


class ForwardInstead(Exception):
    """The policy cannot leave the client room to work and the route says to forward Codex's compaction request to
    the upstream instead (GatewayRoute.Fallback.UPSTREAM); `reason` is recorded with that compaction."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Room:
    """How much history a compaction may leave (spec-free: the gateway's own rule, docs/gateway.md).

    `limit`: the history tokens the client's limit leaves room for. Codex asks for a compaction when its request
    reaches its auto-compact limit, and its base instructions and tools do not change whatever is compacted, so
    the history the compaction request carries (`history`) is what the client's limit leaves for history; the
    route policy's own limit (its auto_compact_token_limit, or 90% of the Provider's window, less the base
    instructions) caps it. `target`: the policy's target share of that (masking's, 50%): a compaction must leave at
    most this, so Codex has room to work before it asks again."""

    history: int
    limit: int
    target: int
    # The policy's strategy is local summarisation: it is the fallback itself, so nothing else could do better.
    summarises: bool = False


def room_of(*, session_id: int) -> Room:
    session = Session.objects.select_related("provider", "policy").get(pk=session_id)
    history = LiveItem.objects.filter(session_id=session_id).aggregate(total=Sum("tokens"))["total"] or 0
    limit = history
    policy_limit = auto_compact_limit(session.provider.context_window, session.policy.auto_compact_token_limit)
    if policy_limit is not None:
        limit = min(limit, max(0, policy_limit - counter_for(session).count_text(session.base_instructions)))
    try:
        summarises = select_strategy(compaction_settings(provider=session.provider, policy=session.policy)) \
            is Strategy.LOCAL
    except ValueError:  # a policy the provider cannot run: the compaction is refused and says why
        summarises = False
    return Room(history=history, limit=limit, target=limit * TARGET_PERCENT // 100, summarises=summarises)


def _not_even_a_summary(failed: CompactionFailed, room: Room) -> CompactionFailed:
    """The failure of a summary that leaves no room at all, said to the client's user (the 400's message) in
    their terms: what is full."""
    return CompactionFailed(attempt=failed.attempt, kind=failed.kind, message=(
        f"not even a summary brings the history under the client's limit: it {failed} (the limit leaves room for "
        f"{room.limit:,} tokens of history)"))


async def compact(*, gs: GatewaySession, history: list[dict[str, Any]],
                  fallback: str = GatewayRoute.Fallback.SUMMARISE) -> tuple[dict[str, Any], int]:
    """Run the policy's compaction on the session; (the compaction item to answer with, tokens before)."""
    compaction = await run_policy_compaction(gs=gs, history=history, fallback=fallback)
    handle = await lookups.run(_store_handle, gs=gs, compaction_id=compaction.pk)
    item = {"type": "compaction", "id": "cmp_" + handle[len(wire.HANDLE_PREFIX):][:24], "encrypted_content": handle}
    return item, int(compaction.tokens_before or 0)


async def run_policy_compaction(*, gs: GatewaySession, history: list[dict[str, Any]],
                                fallback: str = GatewayRoute.Fallback.SUMMARISE, room_target: bool = True):
    """Run the policy's compaction on the session (installed); the Compaction.

    A client asks again at every request while its history is over its limit, and a compaction it cannot get fails
    its turn: so the compaction must leave the client room to work (`Room.target`). Where the policy's strategy
    cannot (masking with nothing, or too little, left to mask: the engine installs nothing, the refused attempt
    stays in the session's attempts), the route's fallback runs: local summarisation with the route's model, which
    must at least bring the history under the client's limit (the Compaction's strategy `local` says it ran), or
    ForwardInstead (the proxy forwards Codex's request to the upstream). A failure of the fallback is raised.

    `room_target=False` (Claude Code, which continues from the summary alone, not from the history the policy
    leaves): no target for that history, so a summary is not refused and made twice for it."""
    room = await lookups.run(room_of, session_id=gs.session_id)
    # A policy that summarises on a route that falls back to summarising: its one summary must leave the history
    # under the client's limit (a second one, made because the first missed the target, would be no better).
    summary_only = room.summarises and fallback == GatewayRoute.Fallback.SUMMARISE
    allowed = max(0, room.limit - 1) if summary_only else room.target
    ask = CompactionAsk(trigger="auto", reason="context_limit", phase=recording.phase_of(history),
                        max_history_tokens=allowed if room_target else None)
    try:
        compaction = await acompact_session(session_id=gs.session_id, ask=ask)
    except CompactionFailed as short:
        if short.kind not in (NOTHING_TO_MASK, SHORT_OF_TARGET_KIND):
            raise
        if summary_only:
            raise _not_even_a_summary(short, room) from None
        reason = (f"the policy's compaction could not leave Codex room to work ({short}; the target is "
                  f"{room.target:,} of the {room.limit:,} tokens of history the client's limit leaves)")
        if fallback == GatewayRoute.Fallback.UPSTREAM:
            logger.info("gateway session %s: %s; forwarding the compaction to the upstream", gs.session_id, reason)
            raise ForwardInstead(reason) from None
        logger.info("gateway session %s: %s; compacting by local summarisation instead", gs.session_id, reason)
        try:
            compaction = await acompact_session(session_id=gs.session_id, ask=dataclasses.replace(
                ask, strategy=Strategy.LOCAL.value, max_history_tokens=max(0, room.limit - 1)))
        except CompactionFailed as still:
            if still.kind != SHORT_OF_TARGET_KIND:
                raise
            raise _not_even_a_summary(still, room) from None
    return compaction
