"""Export writes Codex rollout JSON Lines (spec §15); export then import gives back the same live history, the
same windows and the same rolled-back compactions."""

import json
from io import StringIO

from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from compaction_app.models import Compaction
from sessions_app.codex_rollout import parse_rollout, reconstruct_history
from sessions_app.compactions.rollback import do_rollback_compaction, do_thread_rollback
from sessions_app.models import Session
from sessions_app.rollout import selectors
from sessions_app.rollout.services import verify_projection


def _export(api, session) -> bytes:
    response = api.get(f"/api/v1/sessions/{session.pk}/export")
    assert response.status_code == 200
    return b"".join(response.streaming_content)


def test_export_is_an_attached_json_lines_file_with_session_meta_first(make_session, add_turn, compact, support_api):
    session = make_session(base_instructions="Be brief.")
    add_turn(session, 1)
    compact(session)
    response = support_api.get(f"/api/v1/sessions/{session.pk}/export")
    assert response["Content-Type"] == "application/x-ndjson"
    assert response["Content-Disposition"] == f'attachment; filename="rollout-{session.created_at:%Y-%m-%dT%H-%M-%S}-{session.thread_id}.jsonl"'
    lines = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    assert lines[0]["type"] == "session_meta"
    assert lines[0]["payload"]["id"] == str(session.thread_id)
    assert lines[0]["payload"]["base_instructions"] == {"text": "Be brief."}
    assert {line["type"] for line in lines} >= {"session_meta", "response_item", "compacted", "event_msg"}
    assert all(set(line) == {"timestamp", "type", "payload"} for line in lines)


def test_export_then_import_round_trips_history_windows_and_rollbacks(make_session, add_turn, compact, support_api):
    session = make_session(base_instructions="Be brief.")
    add_turn(session, 1)
    add_turn(session, 2)
    first = compact(session, "local")
    add_turn(session, 3)
    second = compact(session)
    add_turn(session, 4)
    do_rollback_compaction(compaction_id=second.pk, reason="test")
    add_turn(session, 5)
    do_thread_rollback(session_id=session.pk, num_turns=1)
    session.refresh_from_db()
    data = _export(support_api, session)
    # Codex's own resume of the exported file gives the same history
    assert reconstruct_history(parse_rollout(data.splitlines(keepends=True))).history == selectors.live_items(session=session)

    response = support_api.post("/api/v1/sessions/import", {
        "file": SimpleUploadedFile("x.jsonl", data), "new_thread_id": "true"})

    assert response.status_code == 201, response.content
    copy = Session.objects.get(pk=response.json()["session"])
    assert json.dumps(selectors.live_items(session=copy)) == json.dumps(selectors.live_items(session=session))
    assert (copy.window_number, copy.window_id, copy.first_window_id) == (
        session.window_number, session.window_id, session.first_window_id)
    assert copy.base_instructions == "Be brief."
    assert verify_projection(session=copy) == []
    rolled = dict(Compaction.objects.filter(session=copy).values_list("window_id", "rolled_back"))
    assert rolled == {first.window_id: False, second.window_id: True}
    # the imported copy can be rolled back like the original
    result = do_rollback_compaction(compaction_id=Compaction.objects.get(session=copy, window_id=first.window_id).pk)
    assert result.line.kind == "rollback"


def test_export_and_import_management_commands_round_trip_a_sessions_tree(make_session, add_turn, compact, tmp_path):
    session = make_session()
    add_turn(session, 1)
    compact(session)
    call_command("export_rollout", str(session.pk), "--into", str(tmp_path), stderr=StringIO())
    written = list(tmp_path.rglob("*.jsonl"))
    assert len(written) == 1
    assert written[0].relative_to(tmp_path).parts[:3] == (
        f"{session.created_at:%Y}", f"{session.created_at:%m}", f"{session.created_at:%d}")

    out = StringIO()
    call_command("import_rollouts", str(tmp_path), "--new-thread-id", stdout=out)

    assert "1 imported, 0 already imported, 0 failed, of 1 file(s)" in out.getvalue()
    copy = Session.objects.exclude(pk=session.pk).get()
    assert selectors.live_items(session=copy) == selectors.live_items(session=session)


def test_export_to_stdout(make_session, add_turn):
    session = make_session()
    add_turn(session, 1)
    out = StringIO()
    call_command("export_rollout", str(session.pk), stdout=out)
    lines = out.getvalue().splitlines()
    assert json.loads(lines[0])["type"] == "session_meta" and len(lines) >= 3
