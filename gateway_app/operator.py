"""Operator actions on gateway sessions (issue 29), and what the proxy reads of them per request.

- pause / resume (operator): a paused session's next requests are refused with 403 `session_paused` and a message
  Codex shows its user, before anything is forwarded;
- compact at the next request (operator): the gateway runs the route policy's compaction before forwarding that
  session's next turn (`compaction.compact_first`), then forwards the compacted history;
- pins (the session page's pins card): the pinned blocks they put in the recorded history are kept in what the
  upstream sees (`steering.with_pins`);
- support's rollback of a compaction: the next request is forwarded with the history before it
  (`on_rollout_appended` adds the substitution).

Each writes an audit entry. The proxy reads a session's `Control` per request through a cache of
`CONTROL_CACHE_SECONDS` (so an action takes effect within that time in every process; in the one that took it,
at once).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from compaction_app.audit import record_audit
from compaction_app.engine.lru import TtlLru
from compaction_app.engine.pins import PIN_EVENTS, is_pinned_block, pinned_block
from compaction_app.engine.vocabulary import PinMode, method_label
from compaction_app.models import AuditEntry, Compaction, Provider
from compactweb.domain_errors import Conflict
from gateway_app import steering, wire
from gateway_app.models import GatewaySession
from sessions_app.gateway_surface import LiveItem, RolloutLine, session_pins
from sessions_app.gateway_surface import projection as p

logger = logging.getLogger(__name__)

CONTROL_CACHE_SECONDS = 2.0
CONTROLS_CACHED = 10_000  # sessions whose control a process remembers, least recently used dropped first
UNKNOWN = object()


@dataclass(frozen=True)
class Control:
    """What operators decided for one Codex session, as the proxy applies it."""

    session_id: int | None = None
    paused_message: str | None = None
    compact_requested: bool = False
    substitutions: list[dict[str, Any]] = field(default_factory=list)
    pins_block: dict[str, Any] | None = None
    # The pinned blocks of the recorded history: (index in the history, block, the recorded item before it).
    pins_placed: list[tuple[int, dict[str, Any], dict[str, Any] | None]] = field(default_factory=list)


NONE = Control()
_controls: TtlLru[tuple[int, int, str], Control] = TtlLru(CONTROLS_CACHED, seconds=lambda: CONTROL_CACHE_SECONDS)


CODEX = "Codex"
CLAUDE_CODE = "Claude Code"


def client_label(gs: GatewaySession) -> str:
    """The session's client as its notices, audit entries and card name it: Claude Code on a route whose upstream
    speaks the Messages API (the Anthropic gateway serves Claude Code's requests, and a Responses-API route refuses
    them), else Codex (the Responses gateway is Codex's)."""
    return CLAUDE_CODE if gs.route.provider.wire_api == Provider.WireApi.ANTHROPIC else CODEX


def _forget() -> None:
    _controls.clear()  # this process sees a change at once


def forget_controls() -> None:
    """Drop the cached controls (a change to a session's recorded history that the operator's actions did not
    make, such as a compaction the gateway answered)."""
    _forget()


def cached_control(*, route_id: int, key_id: int, group: str):
    """The control read within the last CONTROL_CACHE_SECONDS, or UNKNOWN (no database: the proxy reads this on
    the event loop and goes to the database only when it is UNKNOWN)."""
    if not group:
        return NONE
    return _controls.get((route_id, key_id, group), UNKNOWN)


def _placed_pins(session_id: int) -> list[tuple[int, dict[str, Any], dict[str, Any] | None]]:
    """The recorded history's pinned blocks as (position, block, the item before it): the item before is what
    steering.with_pins checks a request against before putting a block back at that position, since this read
    is cached (CONTROL_CACHE_SECONDS) and another process may have changed the history since."""
    blocks = [(position, item) for position, item in LiveItem.objects.filter(
        session_id=session_id, item__role="developer").order_by("position").values_list("position", "item")
        if is_pinned_block(item)]
    before = dict(LiveItem.objects.filter(session_id=session_id, position__in=[p - 1 for p, _ in blocks])
                  .values_list("position", "item")) if blocks else {}
    return [(position, item, before.get(position - 1)) for position, item in blocks]


def control_of(*, route_id: int, key_id: int, group: str) -> Control:
    """The control of the caller's own session of that group (sync; cached)."""
    if not group:
        return NONE
    # The few columns the control needs, not the session's and policy's whole rows: this runs for most requests.
    row = (GatewaySession.objects.filter(route_id=route_id, key_id=key_id, group_key=group)
           .values_list("session_id", "paused", "paused_by", "compact_requested_by_id", "substitutions",
                        "session__policy__pin_mode").first())
    control = NONE
    if row is not None:
        session_id, paused, paused_by, compact_requested_by, substitutions, pin_mode = row
        block, placed = None, []
        if pin_mode == PinMode.REINJECT:
            pins = session_pins(session_id=session_id)
            block = pinned_block(pins) if pins else None
            placed = _placed_pins(session_id)
        control = Control(
            session_id=session_id,
            paused_message=(f"compactweb: an operator ({paused_by or 'unknown'}) paused this session "
                            f"(#{session_id}); ask them to resume it, or start a new session")
            if paused else None,
            compact_requested=compact_requested_by is not None, substitutions=list(substitutions or []),
            pins_block=block, pins_placed=placed)
    _controls.put((route_id, key_id, group), control)
    return control


class NotSteerable(Conflict):
    """An operator's pause or next-request compaction asked of a session they cannot reach (`steerable`): the
    request is fine, the session's state does not allow it (409 through compactweb.api_errors.STATUSES)."""

    code = "not_steerable"


def steerable(gs: GatewaySession) -> bool:
    """Whether an operator's pause and next-request compaction reach the session. The proxy finds a request's
    controls by the session id its client sends (Codex's thread id or prompt cache key, Claude Code's session id);
    a session recorded by its history alone, from a client that sends none, is only found once its request has
    gone upstream, so neither would ever be applied (while the card said "Paused")."""
    return not gs.group_key.startswith(wire.PREFIX_GROUP)


NOT_STEERABLE = ("its client sends no session id with its requests (Codex's thread id or prompt cache key, "
                 "Claude Code's session id), so the gateway cannot tell them apart before forwarding them: "
                 "pause and compaction at the next request do not reach it")


def do_set_paused(*, session_id: int, paused: bool, actor) -> GatewaySession:
    with transaction.atomic():
        gs = GatewaySession.objects.select_for_update(of=("self",)).select_related("session").get(session_id=session_id)
        if paused and not steerable(gs):
            raise NotSteerable(NOT_STEERABLE)
        gs.paused = paused
        gs.paused_by = actor.get_username() if paused and actor is not None else ""
        gs.save(update_fields=["paused", "paused_by", "updated"])
        record_audit(action=AuditEntry.Action.GATEWAY_PAUSE if paused else AuditEntry.Action.GATEWAY_RESUME,
                     actor=actor, session=gs.session,
                     detail={"route": gs.route_id, "client": gs.client_name})
    _forget()
    return gs


def do_request_compaction(*, session_id: int, actor) -> GatewaySession:
    """Ask for the route policy's compaction before the session's next request is forwarded."""
    with transaction.atomic():
        gs = GatewaySession.objects.select_for_update(of=("self",)).select_related("session").get(session_id=session_id)
        if not steerable(gs):
            raise NotSteerable(NOT_STEERABLE)
        gs.compact_requested_by = actor
        gs.save(update_fields=["compact_requested_by", "updated"])
        record_audit(action=AuditEntry.Action.GATEWAY_COMPACT_REQUEST, actor=actor, session=gs.session,
                     detail={"route": gs.route_id, "client": gs.client_name})
    _forget()
    return gs


def compaction_requester(*, session_id: int):
    """The operator who asked for the next-request compaction (None when nobody, or a deleted user, did)."""
    gs = GatewaySession.objects.select_related("compact_requested_by").filter(session_id=session_id).first()
    return gs.compact_requested_by if gs is not None else None


def do_record_gateway_compaction(*, session_id: int, compaction: Compaction | None, prefix: list[dict[str, Any]],
                                 replacement: list[dict[str, Any]], error: str = "") -> str:
    """The requested compaction ran (or failed): keep forwarding its replacement in place of what it compacted,
    clear the request, and tell the operator (audit entry). The notice it returns says what the gateway did."""
    with transaction.atomic():
        gs = (GatewaySession.objects.select_for_update(of=("self",)).select_related("session", "route__provider")
              .get(session_id=session_id))
        actor = gs.compact_requested_by
        client = client_label(gs)
        if compaction is not None:
            gs.substitutions = steering.with_rule(list(gs.substitutions or []), {
                "kind": "compaction", "compaction_id": compaction.pk, "prefix": prefix, "replacement": replacement})
            figures = (f"compaction #{compaction.pk}, {method_label(compaction.strategy) or compaction.strategy}: "
                       f"{len(prefix):,} items, {compaction.tokens_before:,} tokens → {len(replacement):,} items, "
                       f"{compaction.tokens_after:,} tokens")
            if compaction.tokens_freed > 0:
                notice = (f"The gateway compacted {client}'s history before forwarding its next request ({figures}); "
                          "the upstream gets the compacted history from now on.")
            else:  # nothing looks done that is not (issue 47): it ran, and freed nothing
                notice = (f"The gateway ran the compaction before forwarding {client}'s next request, but it freed "
                          f"nothing ({figures}); the upstream gets its history from now on.")
        else:
            notice = f"The compaction asked for failed, the request went on uncompacted: {error}"
        gs.compact_requested_by = None
        gs.save(update_fields=["substitutions", "compact_requested_by", "updated"])
        record_audit(action=AuditEntry.Action.GATEWAY_COMPACTION, actor=actor, session=gs.session,
                     compaction=compaction, reason=notice[:2000],
                     detail={"items_before": len(prefix), "items_after": len(replacement), "error": error[:500]})
    _forget()
    return notice


def _replacement_at(session_id: int, seq: int) -> list[dict[str, Any]] | None:
    payload = RolloutLine.objects.filter(session_id=session_id, seq=seq).values_list("payload", flat=True).first()
    history = (payload or {}).get("replacement_history")
    return history if isinstance(history, list) else None


# The source of the line that installs the history Claude Code continued from after a compaction compactweb answered
# (gateway_app.recording.CLAUDE_CODE_SUMMARY; recording is a room above this one).
CLAUDE_CODE_SUMMARY = "claude_code_summary"


def _continued_from(session_id: int, ref: dict[str, Any], until_seq: int) -> list[dict[str, Any]] | None:
    """After a compaction compactweb answered for Claude Code, what Claude Code sends is not the compaction's
    replacement but the summary in its own framing, which the request after it installed (a `rollback` line of
    source claude_code_summary naming the compaction): the history a rollback's rule must find in its requests."""
    payload = (RolloutLine.objects.filter(session_id=session_id, kind=p.ROLLBACK, seq__gt=ref["seq"],
                                          seq__lt=until_seq, payload__source=CLAUDE_CODE_SUMMARY,
                                          payload__compaction_id=ref.get("id"))
               .order_by("seq").values_list("payload", flat=True).first())
    history = (payload or {}).get("replacement_history")
    return history if isinstance(history, list) and history else None


def on_rollout_appended(*, session_id: int, lines, **_: Any) -> None:
    """`_on_rollout_appended`, never raising: the append it follows is committed already, and a rule that could not
    be stored must not turn it into an error for whoever appended (it is logged)."""
    try:
        _on_rollout_appended(session_id=session_id, lines=lines)
    except Exception:
        logger.exception("gateway: the rules of session %s could not follow its rollback or redo", session_id)


def _on_rollout_appended(*, session_id: int, lines) -> None:
    """A rollback of a gateway session's compaction: from its next request on, the upstream gets the history
    before the compaction in place of what Codex keeps after it; a redo takes that away again; a pin change is
    read at once (receiver of `rollout_appended`)."""
    if any(event in PIN_EVENTS for _, _, event in lines):
        _forget()  # a pin added or removed: the next request carries the new block
    seqs = [(seq, kind) for seq, kind, _ in lines if kind in (p.ROLLBACK, p.REDO)]
    if not seqs:
        return
    gs = GatewaySession.objects.filter(session_id=session_id).select_related("session").first()
    if gs is None:
        return
    for seq, kind in seqs:
        payload = RolloutLine.objects.get(session_id=session_id, seq=seq).payload
        if kind == p.REDO:  # the compaction is back: the upstream gets what Codex keeps after it again
            redone = (payload.get("redone_compaction") or {}).get("id")
            with transaction.atomic():
                locked = GatewaySession.objects.select_for_update().get(pk=gs.pk)
                locked.substitutions = [r for r in locked.substitutions or []
                                        if not (r.get("kind") == "rollback" and r.get("compaction_id") == redone)]
                locked.save(update_fields=["substitutions", "updated"])
            continue
        undone = [payload.get("rolled_back_compaction") or {}, *(payload.get("undoes") or [])]
        newest = max((ref for ref in undone if ref.get("seq")), key=lambda ref: ref["seq"], default=None)
        prefix = (_continued_from(session_id, newest, seq) or _replacement_at(session_id, newest["seq"])) \
            if newest else None
        before = payload.get("replacement_history")
        if not prefix or not isinstance(before, list):
            continue
        with transaction.atomic():
            locked = GatewaySession.objects.select_for_update().get(pk=gs.pk)
            locked.substitutions = steering.with_rule(list(locked.substitutions or []), {
                "kind": "rollback", "compaction_id": (undone[0] or {}).get("id"), "prefix": prefix,
                "replacement": before})
            locked.save(update_fields=["substitutions", "updated"])
            record_audit(action=AuditEntry.Action.GATEWAY_ROLLBACK, actor=None, session=gs.session,
                         reason=payload.get("reason") or "",
                         detail={"compaction": (undone[0] or {}).get("id"), "rollout_seq": seq,
                                 "items_before": len(before)})
    _forget()


def rollback_note(*, gs: GatewaySession) -> str:
    """What the session page says about rolled-back compactions of a gateway session."""
    rolled = [r for r in gs.substitutions or [] if r.get("kind") == "rollback"]
    if not rolled:
        return ""
    ids = ", ".join(f"#{r.get('compaction_id')}" for r in rolled)
    client = client_label(gs)
    return (f"Rolled back for the upstream: compaction {ids}. {client}'s next requests are forwarded with the "
            f"history before it; the {client} CLI itself still shows its own (compacted) view of the conversation.")


def gateway_state(*, gs: GatewaySession) -> dict[str, Any]:
    """What the gateway card's state list shows (its `gateway_state` partial, on first render and live): paused
    or running, the compaction an operator asked for at the next request, the pins in force, the rollback note.
    Plain values, so a live event can carry it."""
    requester = gs.compact_requested_by
    return {
        "paused": gs.paused, "paused_by": gs.paused_by or "",
        "compact_requested": gs.compact_requested_by_id is not None,
        "compact_requested_by": requester.get_username() if requester is not None else "",
        "pins_count": len(session_pins(session_id=gs.session_id)),
        "pins_forwarded": gs.session.policy.pin_mode == PinMode.REINJECT,
        "rollback_note": rollback_note(gs=gs),
        "client": client_label(gs),
        "steerable": steerable(gs),
    }


def gateway_state_of(*, session_id: int) -> dict[str, Any]:
    """`gateway_state` of the session's gateway row as it is now."""
    gs = (GatewaySession.objects.select_related("compact_requested_by", "session__policy", "route__provider")
          .get(session_id=session_id))
    return gateway_state(gs=gs)
