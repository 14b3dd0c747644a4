"""The gateway's pages: pause and resume a gateway session from its session page (operator)."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from compactweb.roles import OPERATOR, role_required
from gateway_app.models import GatewaySession
from gateway_app.operator import do_set_paused


@require_POST
@role_required(OPERATOR)
def gateway_pause(request, session_id: int, action: str):
    gs = get_object_or_404(GatewaySession, session_id=session_id)
    if action not in ("pause", "resume"):
        return redirect(reverse("session_detail", args=[session_id]))
    do_set_paused(session_id=gs.session_id, paused=action == "pause", actor=request.user)
    messages.success(request, "Paused: the Codex session's next request gets an error saying so."
                     if action == "pause" else "Resumed: the Codex session's requests go through again.")
    return redirect(reverse("session_detail", args=[session_id]))
