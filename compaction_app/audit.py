"""The audit log: who did what, when and why (design: support staff see every compaction, rollback, redo and
configuration change). One writer so every entry has the same shape."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import models

from compaction_app.models import AuditEntry, CompactionPolicy, Provider, RetentionSettings

# Values that must never reach the log (a provider row holds only the *name* of its key's variable, but keep the
# rule in one place should a secret-bearing field ever appear).
_HIDDEN_FIELDS = frozenset({"api_key", "password", "secret"})


def _user_or_none(actor):
    return actor if actor is not None and getattr(actor, "is_authenticated", False) else None


def record_audit(
    *,
    action: str,
    actor=None,
    session=None,
    compaction=None,
    reason: str = "",
    detail: dict[str, Any] | None = None,
) -> AuditEntry:
    """Append one audit entry; anonymous or missing actors are recorded as the system."""
    return AuditEntry.objects.create(
        action=action,
        actor=_user_or_none(actor),
        session=session,
        compaction=compaction,
        reason=reason or "",
        detail=detail or {},
    )


def detach_session(*, session_id: int) -> int:
    """Keep a removed session's audit entries (who did what stays on record) without their link to it: retention
    (sessions_app.archive) removes the session and its compactions, and the entries name it in the archive's own
    entry instead. Returns how many entries were detached."""
    return AuditEntry.objects.filter(
        models.Q(session_id=session_id) | models.Q(compaction__session_id=session_id)
    ).update(session=None, compaction=None)


def plain_value(value: Any) -> Any:
    """A JSON-safe form of a field value: rows become their ids, many-to-many values lists of ids."""
    if isinstance(value, models.Model):
        return value.pk
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, models.QuerySet | set):
        return sorted((plain_value(v) for v in value), key=str)
    if isinstance(value, list | tuple):
        return [plain_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain_value(v) for k, v in value.items()}
    return str(value)


def record_config_change(*, actor, instance: models.Model, changed_fields: Iterable[str], created: bool,
                         previous: dict[str, Any] | None = None, new_values: dict[str, Any] | None = None,
                         via: str = "admin") -> AuditEntry | None:
    """Record a change of a policy, provider or the retention settings (from the Django admin or the API) with the fields that changed and
    their new values (from `new_values`, else read from the row; old values too when `previous` is given). Other
    models are not audited here."""
    if isinstance(instance, CompactionPolicy):
        action = AuditEntry.Action.POLICY_CHANGE
    elif isinstance(instance, Provider):
        action = AuditEntry.Action.PROVIDER_CHANGE
    elif isinstance(instance, RetentionSettings):
        action = AuditEntry.Action.RETENTION_CHANGE
    else:
        return None
    changes = {}
    for name in changed_fields:
        if name in _HIDDEN_FIELDS:
            changes[name] = {"new": "(hidden)"}
            continue
        new = new_values[name] if new_values is not None and name in new_values else getattr(instance, name, None)
        change = {"new": plain_value(new)}
        if previous is not None and name in previous:
            change["old"] = plain_value(previous[name])
        changes[name] = change
    return record_audit(
        action=action,
        actor=actor,
        detail={
            "model": instance._meta.model_name,
            "id": instance.pk,
            "name": str(instance),
            "created": created,
            "via": via,
            "changes": changes,
        },
    )


def field_values(instance: models.Model) -> dict[str, Any]:
    """The concrete field values of a row, to diff against after an update."""
    return {f.name: plain_value(getattr(instance, f.name, None)) for f in instance._meta.concrete_fields}
