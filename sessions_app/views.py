"""Pages: the fleet page (a placeholder until the UI issue grows it) behind login."""

from __future__ import annotations

from django.shortcuts import render

from compactweb.roles import OPERATOR, role_of, role_required
from sessions_app import selectors


@role_required(OPERATOR)
def fleet(request):
    sessions = [selectors.session_summary(session=s) for s in selectors.list_sessions()[:500]]
    return render(request, "sessions_app/fleet.html", {"sessions": sessions, "role": role_of(request.user)})
