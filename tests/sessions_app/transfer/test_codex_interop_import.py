"""Importing real Codex rollouts (made with Codex CLI 0.169 against the simulated model; issue 13, items 1-3):
tolerant of bad lines and still all or nothing in the database, compactions labelled as Codex ran them, and an
export that gives the file back byte for byte."""

from __future__ import annotations

import json

from django.core.files.uploadedfile import SimpleUploadedFile

from compaction_app.models import Compaction
from sessions_app.models import CodexSource, Session
from sessions_app.rollout import selectors
from sessions_app.rollout.services import verify_projection
from sessions_app.transfer import importer

LOCAL = "codex_0169_local_compaction.jsonl"
REMOTE = "codex_0169_remote_v2_compaction.jsonl"


def _import(api, name, data, **extra):
    return api.post("/api/v1/sessions/import", {"file": SimpleUploadedFile(name, data), **extra})


def _export(api, session_id) -> bytes:
    response = api.get(f"/api/v1/sessions/{session_id}/export")
    assert response.status_code == 200
    return b"".join(response.streaming_content)


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _line(kind, payload, ts="2026-12-01T08:48:42.000Z"):
    return (json.dumps({"timestamp": ts, "type": kind, "payload": payload}) + "\n").encode()


def test_a_truncated_last_line_is_skipped_and_reported_and_the_rest_is_imported(
    support_api, rollout_bytes, provider, policy
):
    data = rollout_bytes("truncated_last_line.jsonl")
    response = _import(support_api, "t.jsonl", data)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["skipped_lines"] == 1 and body["strict"] is False
    (problem,) = body["problems"]
    assert problem["line"] == 4 and problem["action"] == "skipped" and "cut short" in problem["reason"]
    session = Session.objects.get(pk=body["session"])
    assert [i["type"] for i in selectors.live_items(session=session)] == ["message"]


def test_garbage_unknown_kinds_nul_and_bad_timestamps_are_tolerated_and_reported(
    support_api, rollout_bytes, provider, policy
):
    lines = _lines(rollout_bytes(LOCAL))
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "nul\u0000here"}]}
    odd = [
        b"this is not json\n",                                                          # 156
        b'{"timestamp":"2026-12-01T08:48:52.000Z","type":"future_kind"}\n',             # 157 no payload
        _line("future_kind", {"x": 1}),                                                  # 158
        _line("response_item", {"type": "hologram", "data": "?"}),                        # 159 unknown item
        _line("response_item", user, ts="yesterday"),                                    # 160 NUL + bad time
    ]
    response = _import(support_api, "rollout-x.jsonl", b"".join([*lines, *odd]))
    assert response.status_code == 201, response.content
    body = response.json()
    by_line = {p["line"]: p for p in body["problems"]}
    assert by_line[156]["action"] == "skipped" and "invalid JSON" in by_line[156]["reason"]
    assert by_line[159]["action"] == "skipped" and "hologram" in by_line[159]["reason"]
    assert by_line[160]["action"] == "repaired"
    assert {157, 158}.isdisjoint(by_line) and body["skipped_kinds"]["future_kind"] == 2
    session = Session.objects.get(pk=body["session"])
    history = selectors.live_items(session=session)
    assert history[-1]["content"][0]["text"] == "nulhere"
    assert all(item["type"] != "hologram" for item in history)  # never sent to a model
    assert verify_projection(session=session) == []


def test_strict_mode_refuses_the_same_file_and_stores_nothing(support_api, rollout_bytes, provider, policy, row_counts):
    data = rollout_bytes(LOCAL) + b"this is not json\n"
    before = row_counts()
    response = _import(support_api, "rollout-x.jsonl", data, strict="true")
    assert response.status_code == 400
    assert response.json()["error"]["lines"] == [{"line": 156, "message": response.json()["error"]["lines"][0]["message"]}]
    assert row_counts() == before and not CodexSource.objects.exists()


def test_real_codex_compactions_are_labelled_as_codex_ran_them(support_api, rollout_bytes, provider, policy):
    local = _import(support_api, LOCAL, rollout_bytes(LOCAL)).json()
    remote = _import(support_api, REMOTE, rollout_bytes(REMOTE)).json()
    (lc,) = Compaction.objects.filter(session_id=local["session"])
    (rc,) = Compaction.objects.filter(session_id=remote["session"])
    assert (lc.implementation, lc.strategy, lc.phase, lc.trigger) == ("responses", "local", "pre_turn", "auto")
    assert (rc.implementation, rc.strategy, rc.phase, rc.trigger) == (
        "responses_compaction_v2", "remote_v2", "pre_turn", "auto")
    assert "compaction_response_id" in rc.inferred["implementation"]
    assert "model_context_window 8550" in rc.inferred["context_window"]
    detail = support_api.get(f"/api/v1/compactions/{rc.pk}").json()
    assert detail["inferred"]["phase"].endswith("pre-turn")


def test_the_window_comes_from_the_rollout_not_the_local_provider(support_api, rollout_bytes, provider, policy):
    body = _import(support_api, REMOTE, rollout_bytes(REMOTE)).json()
    session = Session.objects.get(pk=body["session"])
    assert session.provider.usable_context_window == 8550  # what Codex wrote in its token_count events
    assert provider.usable_context_window != 8550
    assert support_api.get(f"/api/v1/sessions/{session.pk}").json()["context_window"] == session.provider.context_window


def test_a_compaction_after_the_turns_tool_work_is_mid_turn_and_a_turn_without_a_user_message_is_manual(
    support_api, rollout_bytes, provider, policy
):
    lines = _lines(rollout_bytes(LOCAL))
    compacted = next(json.loads(x) for x in lines if b'"type":"compacted"' in x)
    payload = {**compacted["payload"], "window_id": "w-mid", "previous_window_id": compacted["payload"]["window_id"]}
    manual = {**compacted["payload"], "window_id": "w-manual", "previous_window_id": "w-mid"}
    # Line 152 is the final answer of the last turn (after its tool calls); 154 its token count; 155 its end.
    mid = [*lines[:153], _line("compacted", payload), *lines[153:]]
    standalone = [_line("event_msg", {"type": "task_started", "turn_id": "t-compact"}), _line("compacted", manual),
                  _line("event_msg", {"type": "task_complete", "turn_id": "t-compact"})]
    body = _import(support_api, "rollout-mid.jsonl", b"".join([*mid, *standalone])).json()
    phases = list(Compaction.objects.filter(session_id=body["session"]).order_by("rollout_seq")
                  .values_list("phase", "trigger"))
    assert phases == [("pre_turn", "auto"), ("mid_turn", "auto"), ("standalone_turn", "manual")]


def test_the_export_of_an_imported_real_codex_session_is_the_file_byte_for_byte(
    support_api, rollout_bytes, provider, policy
):
    for name in (LOCAL, REMOTE, "truncated_last_line.jsonl"):
        data = rollout_bytes(name)
        body = _import(support_api, name, data, new_thread_id="true").json()
        assert _export(support_api, body["session"]) == data, name


def test_the_export_keeps_the_files_name(support_api, rollout_bytes, provider, policy):
    name = "rollout-2026-12-01T08-48-41-01a230ca-b869-7c02-b569-a052efd86504.jsonl"
    body = _import(support_api, name, rollout_bytes(LOCAL)).json()
    response = support_api.get(f"/api/v1/sessions/{body['session']}/export")
    assert response["Content-Disposition"] == f'attachment; filename="{name}"'


def test_lines_compactweb_adds_after_import_follow_the_file_numbered_on(support_api, rollout_bytes, provider, policy):
    data = rollout_bytes(LOCAL)
    body = _import(support_api, LOCAL, data).json()
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "one more thing"}]}
    assert support_api.post(f"/api/v1/sessions/{body['session']}/items", {"items": [item]},
                             format="json").status_code in (200, 201)
    exported = _export(support_api, body["session"])
    assert exported.startswith(data)
    added = [json.loads(x) for x in exported[len(data):].splitlines()]
    assert added and added[0]["payload"] == item
    assert added[0]["ordinal"] == json.loads(data.splitlines()[-1])["ordinal"] + 1


def test_the_inspector_says_which_labels_were_inferred(support_api, client, support_user, rollout_bytes, provider, policy):
    client.force_login(support_user)
    body = _import(support_api, REMOTE, rollout_bytes(REMOTE)).json()
    (compaction,) = Compaction.objects.filter(session_id=body["session"])
    page = client.get(f"/compactions/{compaction.pk}/").content.decode()
    assert 'id="inferred"' in page and "remote v2" in page and "model_context_window 8550" in page


def test_a_file_read_in_small_chunks_imports_as_it_does_whole(support_api, rollout_bytes, provider, policy, monkeypatch):
    data = rollout_bytes(LOCAL)
    whole = _import(support_api, LOCAL, data).json()
    monkeypatch.setattr(importer, "IMPORT_CHUNK_LINES", 7)
    chunked = _import(support_api, LOCAL, data, new_thread_id="true").json()
    a, b = (Session.objects.get(pk=x["session"]) for x in (whole, chunked))
    assert selectors.live_items(session=a) == selectors.live_items(session=b)
    assert verify_projection(session=b) == []
    assert (chunked["lines_imported"], chunked["compactions"]) == (whole["lines_imported"], whole["compactions"])
    assert [(c.phase, c.implementation) for c in Compaction.objects.filter(session=b)] == [
        (c.phase, c.implementation) for c in Compaction.objects.filter(session=a)]
    assert _export(support_api, b.pk) == data


def test_strict_mode_names_bad_lines_in_every_chunk(support_api, rollout_bytes, provider, policy, row_counts, monkeypatch):
    monkeypatch.setattr(importer, "IMPORT_CHUNK_LINES", 10)
    lines = _lines(rollout_bytes(LOCAL))
    lines[4], lines[99] = b"{broken\n", b"also broken\n"
    before = row_counts()
    response = _import(support_api, LOCAL, b"".join(lines), strict="true")
    assert response.status_code == 400
    assert [e["line"] for e in response.json()["error"]["lines"]] == [5, 100]
    assert row_counts() == before
