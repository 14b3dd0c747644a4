"""Only the admin role configures retention and restores archives (the Django admin); support and operators
cannot (issue 34)."""

from __future__ import annotations

import pytest
from django.test import Client

from compaction_app.models import AuditEntry, RetentionSettings
from sessions_app.archive import services
from sessions_app.models import Session, SessionArchive

SETTINGS_URL = "/admin/compaction_app/retentionsettings/1/change/"
ARCHIVES_URL = "/admin/sessions_app/sessionarchive/"


def _staff_client(user) -> Client:
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    return client


def _form(**changes) -> dict:
    return {
        "enabled": "on",
        "archive_after_days": "14",
        "max_sessions_per_run": "100",
        "run_every_hours": "24",
        **changes,
    }


@pytest.mark.django_db
def test_the_admin_role_configures_retention_and_the_change_is_audited(admin_user_role):
    client = _staff_client(admin_user_role)
    RetentionSettings.current()
    assert client.get("/admin/compaction_app/retentionsettings/").status_code == 302  # opens the one row
    assert client.get(SETTINGS_URL).status_code == 200

    response = client.post(SETTINGS_URL, _form())

    assert response.status_code == 302, response.content[:2000]
    row = RetentionSettings.current()
    assert (row.enabled, row.archive_after_days, row.max_sessions_per_run) == (True, 14, 100)
    entry = AuditEntry.objects.get(action=AuditEntry.Action.RETENTION_CHANGE)
    assert entry.actor == admin_user_role and entry.detail["changes"]["archive_after_days"] == {
        "new": 14,
        "old": 30,
    }


@pytest.mark.django_db
def test_a_zero_day_retention_is_refused(admin_user_role):
    client = _staff_client(admin_user_role)
    RetentionSettings.current()
    response = client.post(SETTINGS_URL, _form(archive_after_days="0"))
    assert response.status_code == 200 and b"greater than or equal to 1" in response.content
    assert RetentionSettings.current().archive_after_days == 30


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["support", "operator"])
def test_support_and_operators_cannot_configure_retention_or_restore(role, make_user, ended_session):
    services.do_run_archiver(trigger="test")
    record = SessionArchive.objects.get()
    client = _staff_client(make_user(role))  # even as staff: no permission on either
    RetentionSettings.current()
    assert client.get(SETTINGS_URL).status_code == 403
    assert client.post(SETTINGS_URL, _form()).status_code == 403
    assert (
        client.post(ARCHIVES_URL, {"action": "restore", "_selected_action": [record.pk]}).status_code == 403
    )
    assert not RetentionSettings.current().enabled
    assert not Session.objects.filter(thread_id=ended_session.thread_id).exists()


@pytest.mark.django_db
def test_the_admin_role_restores_an_archive_from_the_admin(admin_user_role, ended_session, export_bytes):
    expected = export_bytes(ended_session)
    services.do_run_archiver(trigger="test")
    record = SessionArchive.objects.get()
    client = _staff_client(admin_user_role)
    assert b"old work" in client.get(ARCHIVES_URL).content

    response = client.post(ARCHIVES_URL, {"action": "restore", "_selected_action": [record.pk]}, follow=True)

    restored = Session.objects.get(thread_id=ended_session.thread_id)
    assert f"restored as session {restored.pk}".encode() in response.content
    assert export_bytes(restored) == expected
    assert AuditEntry.objects.get(action=AuditEntry.Action.IMPORT, session=restored).actor == admin_user_role
