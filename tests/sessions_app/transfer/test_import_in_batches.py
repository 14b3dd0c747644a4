"""A big import commits in short batches (issue 13, item 5): its lines are staged batch by batch, other writers
get the database between batches, the rollout gets the lines in one short last transaction, a failed import
leaves nothing, and the import publishes a bounded number of live events."""

from __future__ import annotations

import math
import threading

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from sessions_app.models import RolloutLine, Session, StagedRolloutLine
from sessions_app.rollout import events
from sessions_app.rollout.lease import SessionReadOnly
from sessions_app.rollout.services import do_append_items, do_create_session, verify_projection
from sessions_app.transfer import importer

LOCAL = "codex_0169_local_compaction.jsonl"  # 155 lines, one local compaction
BATCH = 10


def _import(api, data, **extra):
    return api.post("/api/v1/sessions/import", {"file": SimpleUploadedFile(LOCAL, data), **extra})


def _user_item(text):
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def test_a_strict_error_late_in_the_file_leaves_no_session_no_rollout_and_no_staged_lines(
    support_api, rollout_bytes, provider, policy, row_counts, monkeypatch
):
    monkeypatch.setattr(importer, "IMPORT_CHUNK_LINES", BATCH)
    lines = rollout_bytes(LOCAL).splitlines(keepends=True)
    lines[150] = b"{cut short\n"  # in the 16th batch: fifteen batches were already staged and committed
    before = row_counts()
    response = _import(support_api, b"".join(lines), strict="true")
    assert response.status_code == 400
    assert [e["line"] for e in response.json()["error"]["lines"]] == [151]
    assert row_counts() == before


def test_a_failure_after_several_committed_batches_leaves_nothing(rollout_bytes, provider, policy, row_counts,
                                                                  monkeypatch):
    monkeypatch.setattr(importer, "IMPORT_CHUNK_LINES", BATCH)
    committed = []

    def fail_in_the_tenth_batch(*, session_id, lines_read):
        committed.append(StagedRolloutLine.objects.filter(session_id=session_id).count())
        if len(committed) == 10:
            raise RuntimeError("disk full")

    monkeypatch.setattr(importer, "import_batch_committed", fail_in_the_tenth_batch)
    before = row_counts()
    with pytest.raises(RuntimeError, match="disk full"):
        importer.do_import_rollout(lines=rollout_bytes(LOCAL).splitlines(keepends=True), source_name=LOCAL,
                                   provider=provider, policy=policy)
    assert committed[-1] > 0  # lines were staged before the failure ...
    assert row_counts() == before  # ... and removed with everything else


@pytest.mark.django_db(transaction=True)
def test_another_writer_commits_between_batches_of_a_long_import(rollout_bytes, provider, policy, monkeypatch):
    """The hook between two batches writes from another connection (another thread): a new session and its first
    item commit while the import is still staging. With one transaction for the whole import, that write would
    wait on the database lock (SQLite: "database is locked")."""
    monkeypatch.setattr(importer, "IMPORT_CHUNK_LINES", BATCH)
    seen: dict = {}
    hook = importer.import_batch_committed

    def other_writer(importing_id):
        try:
            other = do_create_session(title="written mid-import", provider=provider, policy=policy)
            do_append_items(session=other, items=[_user_item("hello")])
            seen["other"] = other.pk
            seen["staged"] = StagedRolloutLine.objects.filter(session_id=importing_id).count()
            seen["installed"] = RolloutLine.objects.filter(session_id=importing_id).count()
            try:
                do_append_items(session=Session.objects.get(pk=importing_id), items=[_user_item("sneak in")])
            except SessionReadOnly:
                seen["read_only"] = True
        except Exception as exc:  # reported below
            seen["error"] = repr(exc)
        finally:
            connection.close()

    def between_batches(*, session_id, lines_read):
        hook(session_id=session_id, lines_read=lines_read)
        if lines_read == 5 * BATCH:
            thread = threading.Thread(target=other_writer, args=(session_id,))
            thread.start()
            thread.join()

    monkeypatch.setattr(importer, "import_batch_committed", between_batches)
    result = importer.do_import_rollout(lines=rollout_bytes(LOCAL).splitlines(keepends=True), source_name=LOCAL,
                                        provider=provider, policy=policy)
    assert "error" not in seen, seen["error"]
    assert RolloutLine.objects.filter(session_id=seen["other"]).count() == 2  # session_meta + the item, committed
    assert seen["staged"] > 0 and seen["installed"] == 0  # visible to the other connection: the batches committed
    assert seen["read_only"] is True  # nothing else writes into a session that is still importing
    session = Session.objects.get(pk=result.session.pk)
    assert session.source == importer.IMPORTED
    assert RolloutLine.objects.filter(session=session).count() == result.lines_imported
    assert StagedRolloutLine.objects.filter(session=session).count() == 0
    assert verify_projection(session=session) == []


def test_an_import_publishes_one_progress_event_per_batch_and_one_lines_event(
    support_api, rollout_bytes, provider, policy, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(importer, "IMPORT_CHUNK_LINES", BATCH)
    sent = []
    monkeypatch.setattr(events, "_worth_sending", lambda groups: True)  # a page watches every group
    monkeypatch.setattr(events, "publish", lambda publication: sent.append(publication[1]))
    data = rollout_bytes(LOCAL)
    with django_capture_on_commit_callbacks(execute=True):
        response = _import(support_api, data)
    assert response.status_code == 201, response.content
    body = response.json()
    mine = [m for m in sent if m["session_id"] == body["session"]]
    progress = [m for m in mine if m["kind"] == importer.IMPORT_PROGRESS]
    lines = [m for m in mine if m["kind"] == events.LINES_KIND]
    assert len(progress) == math.ceil(len(data.splitlines()) / BATCH)
    assert progress[-1]["detail"]["lines_read"] == len(data.splitlines())
    (event,) = lines
    assert (event["first_seq"], event["seq"]) == (1, body["lines_imported"])
    assert event["summary"]["last_seq"] == body["lines_imported"]
