"""Retention (issue 34): an ended session is archived to a gzip file equal to its export, then removed; any
failure on the way deletes nothing; active and recent sessions stay; the file imports back to the same export."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import stat
import time

import pytest
from django.db import connection

from compaction_app.models import (
    AuditEntry,
    Compaction,
    CompactionAttempt,
    CompactionPolicy,
    Provider,
    RetentionSettings,
)
from sessions_app import rollout_guard
from sessions_app.archive import files, services
from sessions_app.models import (
    ArchiveRun,
    ContextWindow,
    LiveItem,
    RolloutLine,
    Session,
    SessionArchive,
)
from sessions_app.rollout import selectors


def _rows(session_id: int) -> dict:
    return {
        "session": Session.objects.filter(pk=session_id).count(),
        "rollout": RolloutLine.objects.filter(session_id=session_id).count(),
        "live": LiveItem.objects.filter(session_id=session_id).count(),
        "windows": ContextWindow.objects.filter(session_id=session_id).count(),
        "compactions": Compaction.objects.filter(session_id=session_id).count(),
        "attempts": CompactionAttempt.objects.filter(session_id=session_id).count(),
    }


def _files(archive_dir) -> list:
    return sorted(p for p in archive_dir.rglob("*") if p.is_file()) if archive_dir.exists() else []


def test_an_ended_session_is_archived_byte_for_byte_equal_to_its_export_and_removed(
    ended_session, export_bytes, archive_dir
):
    expected = export_bytes(ended_session)
    before = _rows(ended_session.pk)
    assert before["rollout"] > 5 and before["compactions"] == 1

    run = services.do_run_archiver(trigger="test")

    assert (run.due, run.archived, run.failed) == (1, 1, 0)
    record = SessionArchive.objects.get(session_id=ended_session.pk)
    path = archive_dir / record.file_name
    assert gzip.decompress(path.read_bytes()) == expected
    assert record.sha256 == hashlib.sha256(expected).hexdigest()
    assert record.file_lines == expected.count(b"\n") and record.export_bytes == len(expected)
    assert (record.rollout_lines, record.last_seq) == (before["rollout"], ended_session.last_seq)
    assert (record.thread_id, record.title, record.run_id) == (ended_session.thread_id, "old work", run.pk)
    assert record.file_name.startswith(f"{ended_session.created_at:%Y/%m/%d}/rollout-")
    assert record.export_name.endswith(f"{ended_session.thread_id}.jsonl")
    assert _rows(ended_session.pk) == dict.fromkeys(before, 0)
    assert _files(archive_dir) == [path]  # no partial file left
    entry = AuditEntry.objects.get(action=AuditEntry.Action.ARCHIVE)
    assert entry.detail["sha256"] == record.sha256 and entry.detail["session_id"] == ended_session.pk
    # the entry outlives the session row: it names the thread and who archived it itself
    assert (entry.detail["thread_id"], entry.detail["by"]) == (str(ended_session.thread_id), "test")
    # the session's earlier audit entries stay, detached from the removed rows
    assert AuditEntry.objects.filter(action=AuditEntry.Action.COMPACTION, session__isnull=True).exists()


def test_restoring_an_archive_gives_back_the_same_export_and_live_history(ended_session, export_bytes):
    expected = export_bytes(ended_session)
    history = json.dumps(selectors.live_items(session=ended_session))
    services.do_run_archiver(trigger="test")
    record = SessionArchive.objects.get(session_id=ended_session.pk)

    result = services.do_restore_archive(archive_id=record.pk)

    restored = Session.objects.get(pk=result.session.pk)
    assert (restored.thread_id, restored.title) == (ended_session.thread_id, "old work")
    assert (restored.provider_id, restored.policy_id) == (ended_session.provider_id, ended_session.policy_id)
    assert export_bytes(restored) == expected
    assert json.dumps(selectors.live_items(session=restored)) == history
    assert Compaction.objects.filter(session=restored).count() == 1
    # restoring twice is refused: the thread is there again
    with pytest.raises(services.Conflict):
        services.do_restore_archive(archive_id=record.pk)


def test_a_restored_session_keeps_its_own_provider_and_policy_not_the_first_configured(
    make_session, add_turn, age, provider, policy
):
    """The importer falls back to the first provider and policy when given none: a restore names the session's."""
    other_provider = Provider.objects.create(
        name="second", base_url=Provider.EMBEDDED, model="sim-1", context_window=32000
    )
    other_policy = CompactionPolicy.objects.create(name="second-policy")
    session = make_session(title="on the second", provider=other_provider, policy=other_policy)
    add_turn(session, 1)
    age(session)
    services.do_run_archiver(trigger="test")

    restored = services.do_restore_archive(archive_id=SessionArchive.objects.get().pk).session

    restored.refresh_from_db()
    assert (restored.provider_id, restored.policy_id) == (other_provider.pk, other_policy.pk)
    assert (provider.pk, policy.pk) < (other_provider.pk, other_policy.pk)  # the first configured are others


def test_archive_files_and_their_day_folder_are_readable_by_their_owner_only(ended_session, archive_dir):
    """An archive holds a whole session's prompts and outputs: no other account on the machine may read it."""
    services.do_run_archiver(trigger="test")
    path = archive_dir / SessionArchive.objects.get().file_name

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_a_restored_session_can_be_archived_again(ended_session, export_bytes, age):
    expected = export_bytes(ended_session)
    services.do_run_archiver(trigger="test")
    restored = services.do_restore_archive(archive_id=SessionArchive.objects.get().pk).session
    age(restored, state=Session.State.IDLE)

    run = services.do_run_archiver(trigger="test")

    assert run.archived == 1
    second = SessionArchive.objects.get(session_id=restored.pk)
    assert second.sha256 == hashlib.sha256(expected).hexdigest()


def test_active_recent_paused_and_leased_sessions_are_never_archived(make_session, add_turn, age, settings):
    from django.utils import timezone

    recent = make_session(title="recent")
    add_turn(recent, 1)
    age(recent, days=3)
    age(make_session(title="running"), state=Session.State.RUNNING)
    age(make_session(title="paused"), state=Session.State.PAUSED)
    leased = age(make_session(title="leased"), state=Session.State.IDLE)
    Session.objects.filter(pk=leased.pk).update(
        lease_holder="worker-1",
        lease_purpose="turn",
        lease_expires_at=timezone.now() + timezone.timedelta(seconds=30),
    )
    imported_in_progress = age(make_session(title="importing"))
    Session.objects.filter(pk=imported_in_progress.pk).update(source="importing")
    age(make_session(title="due"), state=Session.State.IDLE)

    run = services.do_run_archiver(trigger="test", days=30)

    assert list(SessionArchive.objects.values_list("title", flat=True)) == ["due"]
    assert run.due == 1
    assert set(Session.objects.values_list("title", flat=True)) == {
        "recent",
        "running",
        "paused",
        "leased",
        "importing",
    }


def test_the_origin_of_a_replay_stays_while_the_replay_exists(make_session, age):
    origin = age(make_session(title="origin"))
    age(_replay_of(origin, make_session), days=40)
    services.do_run_archiver(trigger="test", days=30)
    assert list(SessionArchive.objects.values_list("title", flat=True)) == ["replay"]
    services.do_run_archiver(trigger="test", days=30)
    assert set(SessionArchive.objects.values_list("title", flat=True)) == {"replay", "origin"}


def test_the_origin_of_a_replay_is_not_due_so_a_run_neither_lists_nor_attempts_it(make_session, age):
    origin = age(make_session(title="origin"), days=50)  # the longer idle: it would come first
    replay = age(_replay_of(origin, make_session), days=40)

    dry = services.do_run_archiver(trigger="test", days=30, dry_run=True)
    run = services.do_run_archiver(trigger="test", days=30)

    assert [d["session"] for d in dry.detail["due"]] == [replay.pk]
    assert (run.due, run.archived, run.failed) == (1, 1, 0)


def _replay_of(origin, make_session):
    replay = make_session(title="replay")
    Session.objects.filter(pk=replay.pk).update(origin=origin, source="replay")
    replay.refresh_from_db()
    return replay


def test_an_unwritable_archive_folder_deletes_nothing(ended_session, archive_dir):
    before = _rows(ended_session.pk)
    archive_dir.parent.mkdir(parents=True, exist_ok=True)
    archive_dir.write_text("not a folder")  # nothing can be written under it (whoever the tests run as)
    run = services.do_run_archiver(trigger="test")
    assert (run.archived, run.failed) == (0, 1)
    # the run's record says which file could not be written and why, not only that something failed
    error = run.detail["failed"][0]["error"]
    assert error.startswith("ArchiveWriteFailed: could not write ") and ".jsonl.gz: " in error
    assert _rows(ended_session.pk) == before
    assert not SessionArchive.objects.exists()
    assert archive_dir.read_text() == "not a folder"


def test_a_file_that_does_not_read_back_as_written_deletes_nothing(ended_session, archive_dir, monkeypatch):
    before = _rows(ended_session.pk)
    monkeypatch.setattr(files, "read_back", lambda path: ("0" * 64, 1, 1))  # as a corrupted write would read
    run = services.do_run_archiver(trigger="test")
    assert (run.archived, run.failed) == (0, 1)
    assert "did not read back as written" in run.detail["failed"][0]["error"]
    assert _rows(ended_session.pk) == before
    assert _files(archive_dir) == []


def test_a_failure_after_the_file_is_written_deletes_nothing_and_removes_the_file(
    ended_session, archive_dir, monkeypatch
):
    before = _rows(ended_session.pk)

    def fail(**kwargs):
        raise RuntimeError("database step failed")

    monkeypatch.setattr(services.records, "delete_session_records", fail)
    run = services.do_run_archiver(trigger="test")
    assert (run.archived, run.failed) == (0, 1)
    assert _rows(ended_session.pk) == before
    assert not SessionArchive.objects.exists()
    assert _files(archive_dir) == []


def test_a_failed_attempt_whose_file_another_run_already_swept_reports_its_own_failure(
    ended_session, archive_dir, monkeypatch
):
    """The file an attempt wrote may be gone when its failure removes it (another process's sweep of unrecorded
    files got there first): that is no second failure, the run records the attempt's own."""

    def swept_then_fail(**kwargs):
        for path in _files(archive_dir):
            path.unlink()
        raise RuntimeError("database step failed")

    monkeypatch.setattr(services.records, "delete_session_records", swept_then_fail)
    run = services.do_run_archiver(trigger="test")
    assert (run.archived, run.failed) == (0, 1)
    assert run.detail["failed"][0]["error"] == "RuntimeError: database step failed"
    assert Session.objects.filter(pk=ended_session.pk).exists()


def test_a_session_written_to_while_it_is_archived_stays(ended_session, archive_dir, monkeypatch, add_turn):
    before_export = services.export_rollout

    def export_then_append(*, session):
        lines = list(before_export(session=session))
        add_turn(Session.objects.get(pk=session.pk), 99)  # a turn lands after the export was read
        return iter(lines)

    monkeypatch.setattr(services, "export_rollout", export_then_append)
    run = services.do_run_archiver(trigger="test")
    assert (run.archived, run.failed) == (0, 1)
    assert "SessionChanged" in run.detail["failed"][0]["error"]
    assert Session.objects.filter(pk=ended_session.pk).exists()
    assert _files(archive_dir) == []


def test_a_dry_run_lists_what_would_go_and_changes_nothing(ended_session, archive_dir):
    before = _rows(ended_session.pk)
    run = services.do_run_archiver(trigger="test", dry_run=True)
    assert run.dry_run and run.due == 1 and run.archived == 0
    assert [d["session"] for d in run.detail["due"]] == [ended_session.pk]
    assert _rows(ended_session.pk) == before and _files(archive_dir) == []


def test_the_admin_settings_choose_the_days_and_the_limit(make_session, age):
    for days in (10, 20, 40, 50):
        age(make_session(title=f"{days} days"), days=days)
    RetentionSettings.objects.update_or_create(
        pk=1, defaults={"archive_after_days": 15, "max_sessions_per_run": 2}
    )
    run = services.do_run_archiver(trigger="test")
    # the longest idle first, at most the limit
    assert sorted(SessionArchive.objects.values_list("title", flat=True)) == ["40 days", "50 days"]
    assert (run.due, run.archived) == (2, 2)
    services.do_run_archiver(trigger="test")
    assert SessionArchive.objects.count() == 3
    assert ArchiveRun.objects.count() == 2


def test_the_rollout_still_refuses_raw_delete_outside_the_archiver(ended_session):
    """Even with an archive record present, a plain DELETE (not scoped by the archiver) is refused by the
    trigger; and the scoped delete refuses a record that does not count every line."""
    from django.db import DatabaseError, transaction

    other_session_lines = RolloutLine.objects.filter(session_id=ended_session.pk).count()
    with transaction.atomic():
        SessionArchive.objects.create(
            session_id=ended_session.pk,
            thread_id=ended_session.thread_id,
            title="forged",
            source="native",
            session_created_at=ended_session.created_at,
            last_activity_at=ended_session.updated_at,
            file_name="x",
            export_name="x",
            sha256="0" * 64,
            file_lines=1,
            export_bytes=1,
            compressed_bytes=1,
            rollout_lines=other_session_lines - 1,
            last_seq=ended_session.last_seq,
            archived_at=ended_session.updated_at,
            archived_by="test",
        )
        with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {rollout_guard.TABLE} WHERE session_id = %s", [ended_session.pk])
        with pytest.raises((DatabaseError, rollout_guard.ArchiveIncomplete)), transaction.atomic():
            rollout_guard.delete_archived_rollout(connection=connection, session_id=ended_session.pk)
        transaction.set_rollback(True)
    assert RolloutLine.objects.filter(session_id=ended_session.pk).count() == other_session_lines




def test_the_sweep_removes_old_files_no_record_names_and_keeps_the_recorded_ones(ended_session, archive_dir):
    # what a killed run leaves (test_killed_run.py kills one, on PostgreSQL only): here laid down by hand
    services.do_run_archiver(trigger="test", directory=archive_dir)
    record = SessionArchive.objects.get()
    for name in ("2026/01/02/stray.jsonl.gz", "2026/01/02/half.jsonl.gz.partial", "2026/01/02/notes.txt"):
        (archive_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (archive_dir / name).write_bytes(b"left behind")
    old = time.time() - files.UNRECORDED_GRACE_SECONDS - 1
    for path in archive_dir.rglob("*"):
        os.utime(path, (old, old))

    swept = services.sweep_unrecorded(directory=archive_dir)

    assert swept == ["2026/01/02/half.jsonl.gz.partial", "2026/01/02/stray.jsonl.gz"]
    assert [p.relative_to(archive_dir).as_posix() for p in _files(archive_dir)] == sorted(
        [record.file_name, "2026/01/02/notes.txt"])


@pytest.mark.django_db
def test_a_run_records_at_most_32_characters_of_its_trigger(archive_dir):
    run = services.do_run_archiver(trigger="t" * 40, directory=archive_dir)
    run.refresh_from_db()
    assert run.trigger == "t" * 32


def test_the_sweep_keeps_an_unrecorded_file_younger_than_the_grace_a_run_may_still_record_it(db, archive_dir):
    # a running archiver's file, written and synced, whose record commits a moment later
    fresh = archive_dir / "2026/01/02/being-recorded.jsonl.gz"
    fresh.parent.mkdir(parents=True)
    fresh.write_bytes(b"just written")

    assert services.sweep_unrecorded(directory=archive_dir) == []
    assert fresh.exists()


def test_an_unrecorded_file_exactly_the_grace_old_counts_as_left_behind(archive_dir):
    stray = archive_dir / "2026/01/02/stray.jsonl.gz"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"left behind")
    written_at = 1_800_000_000
    os.utime(stray, (written_at, written_at))

    def found(now: float) -> list[str]:
        return files.unrecorded_files(directory=archive_dir, recorded=set(), now=now, grace=600)

    assert found(written_at + 600) == ["2026/01/02/stray.jsonl.gz"]
    assert found(written_at + 599.5) == []


def test_an_archive_is_restored_a_chunk_at_a_time_never_read_whole(archive_dir):
    """A session of hundreds of megabytes must not be held in memory whole to be restored: the verified file
    comes back in pieces of at most files.READ_CHUNK bytes, together the file's bytes."""
    lines = [f'{{"n": {n}, "text": "{"x" * 200}"}}\n' for n in range(1000)]  # about 3 chunks
    written = files.write_archive(directory=archive_dir, relative="2026/01/02/big.jsonl.gz", lines=lines)

    chunks = list(files.verified_chunks(directory=archive_dir, relative=written.relative, sha256=written.sha256))

    assert b"".join(chunks) == "".join(lines).encode()
    assert len(chunks) >= 3 and max(len(chunk) for chunk in chunks) <= files.READ_CHUNK


def test_a_run_records_the_files_its_sweep_removed(db, archive_dir):
    stray = archive_dir / "2026/01/02/stray.jsonl.gz"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"left behind")
    old = time.time() - files.UNRECORDED_GRACE_SECONDS - 1
    os.utime(stray, (old, old))

    run = services.do_run_archiver(trigger="test", directory=archive_dir)

    run.refresh_from_db()
    assert run.detail["swept"] == ["2026/01/02/stray.jsonl.gz"] and not stray.exists()


def test_an_archive_file_is_named_after_its_export_without_its_jsonl_and_a_random_part(db):
    import re

    name = files.unique_name(folder="2026/01/02", export_name="rollout-2026-01-02T10-00-00-abc.jsonl")
    assert re.fullmatch(r"2026/01/02/rollout-2026-01-02T10-00-00-abc\.[0-9a-f]{8}\.jsonl\.gz", name)


def test_an_archive_keeps_where_its_session_came_from(ended_session, archive_dir):
    Session.objects.filter(pk=ended_session.pk).update(source="imported")
    services.do_run_archiver(trigger="test")
    assert SessionArchive.objects.get(session_id=ended_session.pk).source == "imported"


def test_a_run_lists_each_session_it_archived_with_its_archive_and_file(ended_session, archive_dir):
    run = services.do_run_archiver(trigger="test")
    record = SessionArchive.objects.get(session_id=ended_session.pk)
    assert run.detail["archived"] == [{"session": ended_session.pk, "archive": record.pk, "file": record.file_name}]
