"""Live follow of a Codex sessions folder (issue 13, item 4): a real Codex 0.169 rollout written piece by piece
into a sessions tree, followed with `sync_file` / the `Follower` (watchdog) / `manage.py follow_rollouts`."""

from __future__ import annotations

import json
import threading
import time
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from compaction_app.models import Compaction
from sessions_app.models import CodexSource, RolloutLine, Session
from sessions_app.rollout import selectors
from sessions_app.rollout.services import verify_projection
from sessions_app.transfer import exporter, importer
from sessions_app.transfer.follow import Follower, sync_file

ROLLOUTS = Path(__file__).resolve().parents[2] / "fixtures" / "rollouts"
LOCAL = (ROLLOUTS / "codex_0169_local_compaction.jsonl").read_bytes()
REMOTE = (ROLLOUTS / "codex_0169_remote_v2_compaction.jsonl").read_bytes()
NAME = "rollout-2026-12-01T08-48-41-01a230ca-b869-7c02-b569-a052efd86504.jsonl"


@pytest.fixture
def rollout_path(tmp_path):
    day = tmp_path / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True)
    return day / NAME


def _write(path: Path, data: bytes, mode="ab"):
    with path.open(mode) as fh:
        fh.write(data)


def _whole_import_history(data: bytes):
    result = importer.do_import_rollout(lines=data.splitlines(keepends=True), new_thread_id=True)
    return selectors.live_items(session=result.session)


@pytest.mark.django_db
def test_a_file_written_piece_by_piece_ends_as_the_whole_file_imported(rollout_path, provider, policy):
    lines = LOCAL.splitlines(keepends=True)
    _write(rollout_path, b"".join(lines[:50]) + lines[50][:40])  # 50 lines and half of the 51st
    first = sync_file(path=rollout_path)
    assert first.action == "imported" and first.lines == 50
    session = Session.objects.get(pk=first.session_id)
    assert session.source == "followed"
    assert CodexSource.objects.get(session=session).line_count == 50  # the partial line waits

    _write(rollout_path, lines[50][40:] + b"".join(lines[51:130]))
    assert sync_file(path=rollout_path).action == "appended"
    _write(rollout_path, b"".join(lines[130:]))
    assert sync_file(path=rollout_path).lines == len(lines) - 130

    session.refresh_from_db()
    assert session.provider.usable_context_window == 8550  # the newest window Codex reported in the file
    assert session.title == "followed: please fix parser bug number 3 in the notes"  # not "imported:" (issue 47)
    assert selectors.live_items(session=session) == _whole_import_history(LOCAL)
    assert verify_projection(session=session) == []
    (compaction,) = Compaction.objects.filter(session=session)
    assert (compaction.implementation, compaction.phase) == ("responses", "pre_turn")
    exported = b"".join(line.encode() for line in exporter.export_rollout(session=session))
    assert exported == LOCAL


@pytest.mark.django_db
def test_a_restarted_follower_resumes_from_its_offset_without_duplicates(rollout_path, provider, policy):
    _write(rollout_path, LOCAL)
    sync_file(path=rollout_path)
    rows = RolloutLine.objects.count()
    assert sync_file(path=rollout_path).action == "unchanged"
    out = StringIO()
    call_command("follow_rollouts", str(rollout_path.parents[3]), "--once", stdout=out)
    assert RolloutLine.objects.count() == rows and Session.objects.count() == 1


@pytest.mark.django_db
def test_a_truncated_file_is_noted_and_read_on_from_its_new_end(rollout_path, provider, policy):
    lines = LOCAL.splitlines(keepends=True)
    _write(rollout_path, b"".join(lines[:100]))
    result = sync_file(path=rollout_path)
    _write(rollout_path, b"".join(lines[:60]), mode="wb")
    assert sync_file(path=rollout_path).action == "truncated"
    rows = RolloutLine.objects.filter(session_id=result.session_id).count()
    _write(rollout_path, next(x for x in lines[100:] if b'"type":"response_item"' in x))
    assert sync_file(path=rollout_path).action == "appended"
    assert RolloutLine.objects.filter(session_id=result.session_id).count() == rows + 1
    assert "cut back" in CodexSource.objects.get(session_id=result.session_id).events[-1]["detail"]


@pytest.mark.django_db
def test_a_file_replaced_under_the_same_name_is_followed_as_a_new_session(rollout_path, provider, policy):
    _write(rollout_path, LOCAL)
    old = sync_file(path=rollout_path)
    _write(rollout_path, REMOTE, mode="wb")
    new = sync_file(path=rollout_path)
    assert new.action == "replaced" and new.session_id != old.session_id
    assert str(Session.objects.get(pk=new.session_id).thread_id) == json.loads(REMOTE.splitlines()[0])["payload"]["id"]
    assert CodexSource.objects.get(session_id=old.session_id).path == ""


LONG_LINE = ('{"timestamp":"2026-12-01T08:49:00.000Z","type":"response_item","payload":{"type":"message",'
             '"role":"user","content":[{"type":"input_text","text":"' + "x" * 50_000 + '"}]}}\n').encode()


@pytest.mark.django_db
def test_a_new_file_with_a_line_past_the_line_limit_is_refused_naming_it(rollout_path, provider, policy, settings):
    settings.COMPACTWEB_MAX_IMPORT_LINE_BYTES = 40_000
    lines = LOCAL.splitlines(keepends=True)
    _write(rollout_path, b"".join(lines[:20]) + LONG_LINE)
    result = sync_file(path=rollout_path)
    assert result.action == "refused"
    assert result.detail.startswith("line 21: the line is longer than 40000 bytes (the import's line limit, "
                                    "COMPACTWEB_MAX_IMPORT_LINE_BYTES)")
    assert not Session.objects.exists()


@pytest.mark.django_db
def test_an_appended_line_past_the_line_limit_stops_the_session_before_it_recorded_once(rollout_path, provider,
                                                                                        policy, settings):
    settings.COMPACTWEB_MAX_IMPORT_LINE_BYTES = 40_000
    lines = LOCAL.splitlines(keepends=True)
    _write(rollout_path, b"".join(lines[:20]))
    session_id = sync_file(path=rollout_path).session_id
    rows = RolloutLine.objects.filter(session_id=session_id).count()
    _write(rollout_path, LONG_LINE + lines[20])
    refused = sync_file(path=rollout_path)
    assert refused.action == "refused" and "line 21: the line is longer than 40000 bytes" in refused.detail
    _write(rollout_path, lines[21])
    assert sync_file(path=rollout_path).action == "refused"
    source = CodexSource.objects.get(session_id=session_id)
    assert RolloutLine.objects.filter(session_id=session_id).count() == rows and source.line_count == 20
    assert [(e["what"], e["action"]) for e in source.events] == [("line too long", "refused")]
    assert "the session stops before it" in source.events[0]["detail"]


@pytest.mark.django_db
def test_followed_sessions_are_read_only_with_one_error_code_on_every_path(rollout_path, provider, policy,
                                                                             support_api):
    _write(rollout_path, LOCAL)
    session_id = sync_file(path=rollout_path).session_id
    compaction = Compaction.objects.get(session_id=session_id)
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    answers = {
        "items": support_api.post(f"/api/v1/sessions/{session_id}/items", {"items": [item]}, format="json"),
        "compact": support_api.post(f"/api/v1/sessions/{session_id}/compact", {"trigger": "manual"}, format="json"),
        "turn": support_api.post(f"/api/v1/sessions/{session_id}/turns", {"input": "hello"}, format="json"),
        "rollback": support_api.post(f"/api/v1/compactions/{compaction.pk}/rollback", {"reason": "try"},
                                     format="json"),
        "redo": support_api.post(f"/api/v1/compactions/{compaction.pk}/redo", {"reason": "try"}, format="json"),
    }
    message = f"session {session_id} follows a Codex rollout file and is read-only in compactweb"
    for path, answer in answers.items():
        assert (path, answer.status_code, answer.json()["error"]) == (
            path, 409, {"code": "read_only", "message": message})


@pytest.mark.django_db(transaction=True)
def test_the_watchdog_follower_picks_up_a_new_file_and_its_new_lines(tmp_path, provider, policy):
    root = tmp_path / "sessions"
    follower = Follower(root, rescan_seconds=30)
    seen = []
    thread = threading.Thread(target=follower.run, kwargs={"on_result": seen.append}, daemon=True)
    thread.start()
    try:
        day = root / "2026" / "12" / "01"
        day.mkdir(parents=True, exist_ok=True)
        lines = LOCAL.splitlines(keepends=True)
        _write(day / NAME, b"".join(lines[:20]))
        _wait(lambda: any(r.action == "imported" for r in seen))
        _write(day / NAME, b"".join(lines[20:]))
        _wait(lambda: CodexSource.objects.filter(line_count=len(lines)).exists())
    finally:
        follower.stop()
        thread.join(timeout=10)
    assert Compaction.objects.filter(session__source="followed").count() == 1


def _wait(condition, limit: float = 20.0) -> None:
    """Poll until `condition` holds (file events arrive asynchronously); fail after `limit` seconds."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the follower did not catch up")
        time.sleep(0.05)


@pytest.mark.django_db
def test_the_fleet_board_and_the_session_page_mark_a_followed_session(rollout_path, provider, policy, client,
                                                                      operator_user):
    _write(rollout_path, LOCAL)
    session_id = sync_file(path=rollout_path).session_id
    client.force_login(operator_user)
    assert "follows a Codex rollout file live" in client.get("/").content.decode()
    assert 'id="followed-badge"' in client.get(f"/sessions/{session_id}/").content.decode()


def _sessions_lines(session_id: int) -> int:
    return RolloutLine.objects.filter(session_id=session_id).count()


@pytest.mark.django_db
def test_a_rewrite_that_keeps_a_prefix_is_resynced_recorded_and_shown(rollout_path, provider, policy, client,
                                                                       operator_user):
    lines = LOCAL.splitlines(keepends=True)
    _write(rollout_path, b"".join(lines[:100]))
    first = sync_file(path=rollout_path)
    rows = _sessions_lines(first.session_id)
    other = next(x for x in lines[100:] if b'"type":"response_item"' in x)
    # Rewritten in place: the first 80 lines as before, then one line the follower never read.
    _write(rollout_path, b"".join(lines[:80]) + other, mode="wb")
    result = sync_file(path=rollout_path)
    assert (result.action, result.session_id, result.lines) == ("resynced", first.session_id, 1)
    assert _sessions_lines(first.session_id) == rows + 1  # what was read stays; the new line is read on
    source = CodexSource.objects.get(session_id=first.session_id)
    (event,) = source.events
    assert event["action"] == "resynced" and "first 80 lines" in event["detail"] and "line 81 on differs" in event["detail"]
    assert source.offset == rollout_path.stat().st_size
    assert sync_file(path=rollout_path).action == "unchanged"
    client.force_login(operator_user)
    page = client.get(f"/sessions/{first.session_id}/").content.decode()
    assert 'data-file-event="resynced"' in page and "line 81 on differs" in page


@pytest.mark.django_db
def test_a_file_saved_anew_with_the_same_lines_and_more_reads_only_the_new_ones(rollout_path, provider, policy):
    lines = LOCAL.splitlines(keepends=True)
    _write(rollout_path, b"".join(lines[:100]))
    first = sync_file(path=rollout_path)
    rows = _sessions_lines(first.session_id)
    replacement = rollout_path.with_suffix(".tmp")
    _write(replacement, b"".join(lines[:101]), mode="wb")
    replacement.replace(rollout_path)  # an editor's atomic save: another inode under the same name
    result = sync_file(path=rollout_path)
    assert (result.action, result.lines) == ("resynced", 1)
    assert _sessions_lines(first.session_id) >= rows
    session = Session.objects.get(pk=first.session_id)
    assert selectors.live_items(session=session) == _whole_import_history(b"".join(lines[:101]))
    source = CodexSource.objects.get(session_id=first.session_id)
    assert source.line_count == 101 and source.events[-1]["action"] == "resynced"


@pytest.mark.django_db
def test_a_rewrite_sharing_no_line_becomes_a_new_session_linked_to_the_old_one(rollout_path, provider, policy,
                                                                              client, operator_user):
    lines = LOCAL.splitlines(keepends=True)
    _write(rollout_path, b"".join(lines[:100]))
    old = sync_file(path=rollout_path)
    rows = _sessions_lines(old.session_id)
    meta = json.loads(lines[0])
    meta["timestamp"] = "2026-12-01T09:00:00.000Z"  # the same thread, its first line written again differently
    _write(rollout_path, json.dumps(meta).encode() + b"\n" + b"".join(lines[1:40]), mode="wb")
    new = sync_file(path=rollout_path)
    assert new.action == "replaced" and new.session_id not in (None, old.session_id)
    assert _sessions_lines(old.session_id) == rows  # the old session keeps what it read
    new_source = CodexSource.objects.get(session_id=new.session_id)
    assert new_source.continues_id == old.session_id and new_source.followed and new_source.line_count == 40
    old_thread = str(Session.objects.get(pk=old.session_id).thread_id)
    new_meta = RolloutLine.objects.filter(session_id=new.session_id).order_by("seq").first().payload
    assert new_meta["forked_from_id"] == old_thread != new_meta["id"]
    (event,) = CodexSource.objects.get(session_id=old.session_id).events
    assert event["action"] == "new_session" and event["session"] == new.session_id
    _write(rollout_path, lines[40])
    assert sync_file(path=rollout_path).session_id == new.session_id  # followed on as the new session
    client.force_login(operator_user)
    assert f'data-continued-by="{new.session_id}"' in client.get(f"/sessions/{old.session_id}/").content.decode()
    assert f'data-continues="{old.session_id}"' in client.get(f"/sessions/{new.session_id}/").content.decode()


@pytest.mark.django_db
def test_appending_one_line_costs_the_same_queries_whatever_the_session_size(tmp_path, provider, policy):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    lines = LOCAL.splitlines(keepends=True)
    line = next(x for x in lines[150:] if b'"type":"response_item"' in x and b'"role":"assistant"' in x)
    queries = []
    for size in (20, 150):
        path = tmp_path / f"s{size}" / NAME
        path.parent.mkdir()
        meta = json.loads(lines[0])
        meta["payload"]["id"] = str(uuid.uuid4())  # two sessions: two threads
        _write(path, json.dumps(meta).encode() + b"\n" + b"".join(lines[1:size]))
        sync_file(path=path)
        _write(path, line)
        with CaptureQueriesContext(connection) as captured:
            assert sync_file(path=path).action == "appended"
        sql = [q["sql"] for q in captured.captured_queries]
        assert not any("sessions_app_liveitem" in s and s.lstrip().upper().startswith("SELECT") for s in sql)
        queries.append(len(sql))
    assert queries[0] == queries[1]


def test_the_followers_own_reads_trigger_no_sync(tmp_path):
    from watchdog.events import FileClosedNoWriteEvent, FileModifiedEvent, FileOpenedEvent

    follower = Follower(tmp_path)
    handler = follower.handler()
    name = str(tmp_path / NAME)
    handler.dispatch(FileOpenedEvent(name))
    handler.dispatch(FileClosedNoWriteEvent(name))
    assert follower.pending() == 0
    handler.dispatch(FileModifiedEvent(name))
    assert follower.pending() == 1


@pytest.mark.django_db(transaction=True)
def test_a_rescan_of_an_unchanged_folder_syncs_nothing(rollout_path, provider, policy):
    _write(rollout_path, LOCAL)
    follower = Follower(rollout_path.parents[3])
    follower.rescan()
    assert follower.syncs == 1 and CodexSource.objects.count() == 1
    follower.rescan()
    follower.rescan()
    assert follower.syncs == 1  # a stat per file, no read and no query
    _write(rollout_path, next(x for x in LOCAL.splitlines(keepends=True) if b'"type":"response_item"' in x))
    follower.rescan()
    assert follower.syncs == 2
