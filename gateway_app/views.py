"""The gateway's pages (issue 29): an operator's actions on a gateway session, from its session page."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from compactweb.roles import OPERATOR, role_required
from gateway_app.models import GatewaySession
from gateway_app.operator import do_request_compaction, do_set_paused

DONE = {
    "pause": "Paused: the Codex session's next request gets an error saying so.",
    "resume": "Resumed: the Codex session's requests go through again.",
    "compact": "Asked for: the gateway runs the route policy's compaction before forwarding Codex's next request, "
               "and says here what it did.",
}


@require_POST
@role_required(OPERATOR)
def gateway_action(request, session_id: int, action: str):
    if action not in DONE:
        raise Http404("no such gateway action")
    gs = get_object_or_404(GatewaySession, session_id=session_id)
    if action == "compact":
        do_request_compaction(session_id=gs.session_id, actor=request.user)
    else:
        do_set_paused(session_id=gs.session_id, paused=action == "pause", actor=request.user)
    messages.success(request, DONE[action])
    return redirect(reverse("session_detail", args=[session_id]))
