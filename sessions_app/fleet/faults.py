"""Fault injection per session, switched by an operator (design: "fault injection an operator can switch on per
session"). The simulated model reads the session's `fault_injection` as request headers on every request of its
turns and compactions (sessions_app.compactions.settings_builder.fault_headers)."""

from __future__ import annotations

from django.db import transaction

from compaction_app.audit import record_audit
from compaction_app.models import AuditEntry
from sessions_app.compactions.settings_builder import FaultInjectionError, fault_headers
from sessions_app.models import Session


def do_set_session_faults(*, session_id: int, fault: str, actor) -> Session:
    """Set (or, with `fault=""`, clear) the session's simulated-model fault, keeping its other fault settings.
    A malformed fault raises FaultInjectionError and changes nothing; every change is in the audit log."""
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=session_id)
        injection = {k: v for k, v in (session.fault_injection or {}).items() if k != "fault"}
        if fault:
            injection["fault"] = fault
        fault_headers(injection)  # raises FaultInjectionError for a malformed value
        before = (session.fault_injection or {}).get("fault", "")
        session.fault_injection = injection
        session.save(update_fields=["fault_injection", "updated_at"])
        record_audit(action=AuditEntry.Action.FAULT_INJECTION, actor=actor, session=session,
                     detail={"fault": fault, "before": before})
    return session


__all__ = ["FaultInjectionError", "do_set_session_faults"]
