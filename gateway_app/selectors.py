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
    gs = (GatewaySession.objects.select_related("route", "compact_requested_by", "session__policy")
          .filter(session_id=session_id).first())
    if gs is None:
        return {"gs": None}
    notice = (AuditEntry.objects.filter(session_id=session_id, action__in=NOTICE_ACTIONS)
              .order_by("-created_at", "-pk").values_list("reason", flat=True).first())
    cut = gs.failed_attempts.filter(cut=True)
    return {"gs": gs, "requests": gs.requests, **gateway_state(gs=gs), "notice": notice or "",
            "cut_count": cut.count(), "last_cut": cut.order_by("-created", "-pk").first()}
