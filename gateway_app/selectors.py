"""Reads for the gateway's pages (issue 29)."""

from __future__ import annotations

from typing import Any

from compaction_app.models import AuditEntry
from gateway_app.models import GatewaySession
from gateway_app.operator import gateway_state

NOTICE_ACTIONS = (AuditEntry.Action.GATEWAY_COMPACTION,)


def gateway_card(*, session_id: int) -> dict[str, Any]:
    """The card's context: the gateway session (None for another session), its request count, its state
    (`gateway_state`) and the notice of the last compaction the gateway ran for an operator."""
    gs = (GatewaySession.objects.select_related("route__provider", "compact_requested_by", "session__policy")
          .filter(session_id=session_id).first())
    if gs is None:
        return {"gs": None}
    notice = (AuditEntry.objects.filter(session_id=session_id, action__in=NOTICE_ACTIONS)
              .order_by("-created_at", "-pk").values_list("reason", flat=True).first())
    return {"gs": gs, "requests": gs.requests, **gateway_state(gs=gs), "notice": notice or "", **cut_state(gs=gs)}


def cut_state(*, gs: GatewaySession) -> dict[str, Any]:
    """What the card's `gateway_cut` partial shows (on first render, and live when an exchange is cut): how many of
    the session's exchanges were cut and why the last one was."""
    cut = gs.failed_attempts.filter(cut=True)
    last = cut.order_by("-created", "-pk").values_list("error", flat=True).first()
    return {"cut_count": cut.count(), "last_cut_error": last or ""}
