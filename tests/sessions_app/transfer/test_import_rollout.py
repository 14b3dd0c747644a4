"""Importing Codex rollout JSON Lines (spec §15, §8.2): the imported session's live history is what Codex's resume
rebuilds; unknown kinds are skipped and counted; a bad file is refused whole, naming its bad line."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from compaction_app.models import AuditEntry, Compaction
from sessions_app.codex_rollout import parse_rollout, reconstruct_history
from sessions_app.models import Session
from sessions_app.rollout import selectors
from sessions_app.rollout.services import verify_projection


def _upload(name, data):
    return SimpleUploadedFile(name, data, content_type="application/x-ndjson")


def _expected(data: bytes):
    return reconstruct_history(parse_rollout(data.splitlines(keepends=True)))


def test_imported_history_is_what_codex_resume_rebuilds_including_legacy_compactions(
    support_api, support_user, provider, policy, rollout_bytes
):
    data = rollout_bytes("compactions.jsonl")

    response = support_api.post("/api/v1/sessions/import", {"file": _upload("rollout-a.jsonl", data),
                                                              "provider": provider.pk, "policy": policy.pk})

    assert response.status_code == 201, response.content
    body = response.json()
    session = Session.objects.get(pk=body["session"])
    expected = _expected(data)
    assert selectors.live_items(session=session) == expected.history
    assert verify_projection(session=session) == []
    meta = json.loads(data.splitlines()[0])["payload"]
    assert (session.source, str(session.thread_id), session.base_instructions) == (
        "imported", meta["id"], meta["base_instructions"]["text"])
    assert body["compactions"] == 2 and body["legacy_compactions_rebuilt"] == 1
    compactions = list(Compaction.objects.filter(session=session).order_by("rollout_seq"))
    assert [c.window_number for c in compactions] == [1, 2]  # the legacy numeric window id is a window number
    assert compactions[0].window_id == "0199a1f0-2222-7000-8000-0000000000a1"
    assert session.window_number == expected.window_number
    entry = AuditEntry.objects.get(action="import")
    assert (entry.actor, entry.session_id) == (support_user, session.pk)


def test_a_codex_thread_rollback_across_a_compaction_imports_to_the_resumed_history(support_api, rollout_bytes, provider, policy):
    data = rollout_bytes("rollback_across_compaction.jsonl")
    response = support_api.post("/api/v1/sessions/import", {"file": _upload("r.jsonl", data)})
    assert response.status_code == 201, response.content
    session = Session.objects.get(pk=response.json()["session"])
    assert selectors.live_items(session=session) == _expected(data).history
    assert response.json()["thread_rollbacks"] == 1


def test_unknown_kinds_are_skipped_and_counted(support_api, rollout_bytes, provider, policy):
    response = support_api.post("/api/v1/sessions/import", {"file": _upload("b.jsonl", rollout_bytes("basic_session.jsonl"))})
    assert response.status_code == 201, response.content
    assert response.json()["skipped_kinds"] == {"future_kind": 2, "telemetry_blob": 1}
    assert response.json()["skipped_count"] == 3


def test_a_raw_json_lines_body_is_imported_with_query_parameters(support_api, rollout_bytes, provider, policy):
    response = support_api.generic(
        "POST", f"/api/v1/sessions/import?title=From+raw&policy={policy.pk}", rollout_bytes("basic_session.jsonl"),
        content_type="application/x-ndjson",
    )
    assert response.status_code == 201, response.content
    assert Session.objects.get(pk=response.json()["session"]).title == "From raw"


def test_in_strict_mode_a_truncated_file_is_refused_whole_and_names_the_bad_line(support_api, rollout_bytes, row_counts, provider, policy):
    before = row_counts()
    response = support_api.post("/api/v1/sessions/import", {"file": _upload("t.jsonl", rollout_bytes("truncated_last_line.jsonl")),
                                                              "strict": "true"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_rollout"
    assert error["message"].startswith("line 4: invalid JSON")
    assert [line["line"] for line in error["lines"]] == [4]
    assert row_counts() == before


def test_in_strict_mode_a_corrupted_line_in_the_middle_is_refused_whole(support_api, rollout_bytes, row_counts, provider, policy):
    lines = rollout_bytes("compactions.jsonl").splitlines(keepends=True)
    lines[20] = b'{"timestamp":"2026-04-19T10:37:00.000Z","type":"response_item","payload":{"role":"user"}}\n'
    before = row_counts()
    response = support_api.post("/api/v1/sessions/import", {"file": _upload("c.jsonl", b"".join(lines)), "strict": "true"})
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("line 21: ")
    assert row_counts() == before


def test_in_strict_mode_an_item_our_validator_refuses_is_reported_with_its_line(support_api, rollout_bytes, row_counts, provider, policy):
    lines = rollout_bytes("basic_session.jsonl").splitlines(keepends=True)
    lines[5] = b'{"timestamp":"2026-04-19T10:37:00.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":5}]}}\n'
    before = row_counts()
    response = support_api.post("/api/v1/sessions/import", {"file": _upload("v.jsonl", b"".join(lines)), "strict": "true"})
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("line 6: response_item.content[0].text")
    assert row_counts() == before


def test_importing_the_same_thread_twice_is_refused_with_409(support_api, rollout_bytes, row_counts, provider, policy):
    data = rollout_bytes("basic_session.jsonl")
    first = support_api.post("/api/v1/sessions/import", {"file": _upload("a.jsonl", data)}).json()["session"]
    before = row_counts()
    response = support_api.post("/api/v1/sessions/import", {"file": _upload("a.jsonl", data)})
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "already_imported"
    assert response.json()["error"]["message"].endswith(f"already imported as session {first}")
    assert row_counts() == before
    again = support_api.post("/api/v1/sessions/import", {"file": _upload("a.jsonl", data), "new_thread_id": "true"})
    assert again.status_code == 201


def test_import_needs_the_operator_role(anon_api, norole_api, rollout_bytes, provider, policy):
    data = rollout_bytes("basic_session.jsonl")
    assert anon_api.post("/api/v1/sessions/import", {"file": _upload("a.jsonl", data)}).status_code == 401
    assert norole_api.post("/api/v1/sessions/import", {"file": _upload("a.jsonl", data)}).status_code == 403


def test_a_request_without_a_file_is_refused(support_api, provider, policy, row_counts):
    before = row_counts()
    response = support_api.post("/api/v1/sessions/import", {"title": "x"})
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("file:")
    assert row_counts() == before


def test_in_strict_mode_a_session_meta_with_a_bad_id_or_time_is_refused_naming_line_one(support_api, rollout_bytes, row_counts, provider, policy):
    lines = rollout_bytes("basic_session.jsonl").splitlines(keepends=True)
    meta = json.loads(lines[0])
    meta["timestamp"], meta["payload"]["id"] = "yesterday", "not-a-uuid"
    lines[0] = json.dumps(meta).encode() + b"\n"
    before = row_counts()
    response = support_api.post("/api/v1/sessions/import", {"file": _upload("m.jsonl", b"".join(lines)), "strict": "true"})
    assert response.status_code == 400
    assert [(e["line"], e["message"]) for e in response.json()["error"]["lines"]] == [
        (1, "session_meta.id is not a UUID"), (1, "timestamp 'yesterday' is not ISO-8601")]
    assert row_counts() == before


def test_an_edited_marker_that_cannot_be_folded_is_refused_and_stores_nothing(support_api, rollout_bytes, row_counts, provider, policy):
    marker = {"timestamp": "2026-04-19T10:40:00.000Z", "type": "event_msg", "payload": {
        "type": "compactweb_line", "kind": "window_opened", "seq": 9, "payload": {"window_id": "w-x", "window_number": "many"}}}
    data = rollout_bytes("basic_session.jsonl") + json.dumps(marker).encode() + b"\n"
    before = row_counts()
    response = support_api.post("/api/v1/sessions/import", {"file": _upload("e.jsonl", data)})
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("the rollout cannot be imported:")
    assert row_counts() == before


def test_a_bug_of_our_own_during_an_import_is_not_reported_as_a_bad_file(
    operator_user, rollout_bytes, row_counts, provider, policy, monkeypatch
):
    """A ValueError raised by compactweb's own code while it imports a good file is a bug: it is raised as it is
    (the API answers 500, a job fails with internal_error), never turned into "the rollout cannot be imported"."""
    from sessions_app.transfer import importer
    from sessions_app.transfer.refusals import TransferRefused

    def broken(**kwargs):
        raise ValueError("a bug in compactweb, not in the file")

    monkeypatch.setattr(importer, "install_staged_lines", broken)
    before = row_counts()
    with pytest.raises(ValueError, match="a bug in compactweb") as raised:
        importer.do_import_rollout(lines=rollout_bytes("basic_session.jsonl").splitlines(keepends=True),
                                   source_name="basic_session.jsonl", actor=operator_user)
    assert not isinstance(raised.value, TransferRefused)
    assert row_counts() == before  # and the half-made import is discarded, as for a bad file


@pytest.mark.django_db
def test_an_empty_file_is_refused_as_empty_through_every_way_in(support_api, provider, policy):
    for body in (b"", b"\n\n  \n"):
        answer = support_api.generic("POST", "/api/v1/sessions/import?wait=1", body,
                                      content_type="application/x-ndjson")
        assert answer.status_code == 400, body
        assert answer.json()["error"]["message"].startswith("line 1: the file is empty"), body
    assert Session.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize("strict", ["false", "true"])
def test_a_file_with_a_byte_order_mark_is_refused_naming_the_mark(support_api, rollout_bytes, provider, policy,
                                                                  strict):
    data = rollout_bytes("codex_0169_local_compaction.jsonl")
    answer = support_api.generic("POST", f"/api/v1/sessions/import?wait=1&strict={strict}", b"\xef\xbb\xbf" + data,
                                  content_type="application/x-ndjson")
    assert answer.status_code == 400
    assert answer.json()["error"]["message"].startswith(
        "line 1: the file begins with a UTF-8 byte order mark (BOM), which Codex never writes")


def _legacy_rollout(window_number: int) -> bytes:
    """A legacy rollout whose one compaction wrote its window number into `window_id` (spec §1.5), a number
    that is not the header's next (0 + 1)."""
    def line(kind, payload, second):
        return json.dumps({"timestamp": f"2026-04-19T10:00:{second:02d}.000Z", "type": kind, "payload": payload})

    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the parser"}]}
    answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "fixed"}]}
    summary = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "summary: fixed"}]}
    lines = [
        line("session_meta", {"id": "0199a1f0-2222-7000-8000-0000000000c7", "timestamp": "2026-04-19T10:00:00.000Z",
                              "cwd": "/p", "originator": "codex_cli_rs", "cli_version": "0.40.0", "source": "cli",
                              "base_instructions": {"text": "You are Codex."}}, 0),
        line("response_item", user, 1),
        line("response_item", answer, 2),
        line("compacted", {"message": "summary: fixed", "replacement_history": [user, summary],
                           "window_id": window_number}, 3),
    ]
    return ("\n".join(lines) + "\n").encode()


def test_a_legacy_numeric_window_id_keeps_its_window_number_and_gets_no_minted_id(support_api, provider, policy):
    response = support_api.generic("POST", "/api/v1/sessions/import?wait=1", _legacy_rollout(7),
                                    content_type="application/x-ndjson")
    assert response.status_code == 201, response.content
    session = Session.objects.get(pk=response.json()["session"])
    (compaction,) = Compaction.objects.filter(session=session)
    assert (compaction.window_number, compaction.window_id) == (7, "")
    first_window = session.first_window_id
    assert compaction.previous_window_id == first_window != ""
    assert (session.window_number, session.window_id) == (7, "")
    numbers = list(session.windows.order_by("number").values_list("number", "window_id"))
    assert numbers == [(0, first_window), (7, "")]
    detail = support_api.get(f"/api/v1/sessions/{session.pk}").json()
    assert (detail["window_number"], detail["window_id"]) == (7, "")
