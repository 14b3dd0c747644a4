"""`manage.py archive_sessions` runs the retention policy now (`--dry-run` lists what would go);
`manage.py restore_archive` imports an archive back."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from sessions_app.archive import files
from sessions_app.models import ArchiveRun, Session, SessionArchive


def _run(*args) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_a_dry_run_lists_the_due_sessions_and_removes_nothing(ended_session):
    out, _ = _run("archive_sessions", "--dry-run", "--days", "30")
    assert f"would archive session {ended_session.pk}" in out and "old work" in out
    assert "1 session(s) due" in out
    assert Session.objects.filter(pk=ended_session.pk).exists()
    assert ArchiveRun.objects.get().dry_run


def test_archive_then_restore_by_command_gives_back_the_export(ended_session, export_bytes):
    expected = export_bytes(ended_session)
    out, _ = _run("archive_sessions", "--days", "30")
    assert f"archived session {ended_session.pk} to " in out and "1 archived, 0 failed" in out
    assert not Session.objects.filter(pk=ended_session.pk).exists()

    out, _ = _run("restore_archive", "--session", str(ended_session.pk))

    restored = Session.objects.get(thread_id=ended_session.thread_id)
    assert f"as session {restored.pk}" in out
    assert export_bytes(restored) == expected


def test_a_failed_session_makes_the_command_fail_and_stays(ended_session, monkeypatch):
    monkeypatch.setattr(files, "read_back", lambda path: ("0" * 64, 0, 0))
    with pytest.raises(CommandError, match="could not be archived"):
        _run("archive_sessions", "--days", "30")
    assert Session.objects.filter(pk=ended_session.pk).exists()


def test_a_changed_archive_file_is_not_restored(ended_session, archive_dir):
    _run("archive_sessions", "--days", "30")
    record = SessionArchive.objects.get()
    path = archive_dir / record.file_name
    path.write_bytes(path.read_bytes()[:-20] + b"\0" * 20)  # damaged on disk
    with pytest.raises(CommandError, match="cannot be read|does not match"):
        _run("restore_archive", str(record.pk))
    assert not Session.objects.filter(thread_id=ended_session.thread_id).exists()


def test_restoring_an_unknown_archive_is_refused(db):
    with pytest.raises(CommandError, match="no archive 999"):
        _run("restore_archive", "999")
    with pytest.raises(CommandError, match="was not archived"):
        _run("restore_archive", "--session", "999")
