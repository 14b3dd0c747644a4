"""The audit log page (support): every compaction, rollback, redo, thread rollback, import, replay and
configuration change, filtered by action and session. Thin: parse the filter form, check the role, render."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.shortcuts import render

from compaction_app.models import AuditEntry
from compactweb.roles import SUPPORT, role_required
from sessions_app.web.forms import AuditFilterForm

AUDIT_PAGE_SIZE = 50


@role_required(SUPPORT)
def audit_log(request):
    """Every compaction, rollback, redo, thread rollback, import, replay and configuration change: who, when, why."""
    entries = AuditEntry.objects.select_related("actor", "session", "compaction")
    filters = AuditFilterForm(request.GET).filters()
    action, session_id = filters["action"], filters["session"]
    if action:
        entries = entries.filter(action=action)
    if session_id is not None:
        entries = entries.filter(session_id=session_id)
    page = Paginator(entries, AUDIT_PAGE_SIZE).get_page(request.GET.get("page"))
    query = "&".join(f"{k}={v}" for k, v in (("action", action), ("session", session_id)) if v not in ("", None))
    return render(request, "sessions_app/audit_log.html", dict(
        nav="audit", page=page, actions=AuditEntry.Action.choices, action=action, session_id=session_id,
        query=query,
    ))
