"""Importing a Claude Code transcript through the public paths (issue 35): the import API and page tell it from a
Codex rollout by itself, its compactions carry Claude Code's triggers, the inspector and fleet show it, and the
export gives the file back byte for byte."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile

from compaction_app.models import Compaction
from sessions_app.models import Session
from sessions_app.rollout import selectors
from sessions_app.rollout.services import verify_projection
from sessions_app.transfer import exporter
from tests.sessions_app.claude_transcript.transcripts import SESSION, conversation_with_two_compactions, text

NAME = f"{SESSION}.jsonl"


def _import(api, data, **extra):
    return api.post("/api/v1/sessions/import", {"file": SimpleUploadedFile(NAME, data), **extra})


def test_the_import_api_reads_a_claude_code_transcript_and_exports_it_byte_for_byte(operator_api, provider, policy):
    data = conversation_with_two_compactions().bytes()
    response = _import(operator_api, data)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["thread_id"] == SESSION and body["compactions"] == 2 and body["skipped_lines"] == 0
    assert body["kind_counts"]["attachment"] == 2 and body["kind_counts"]["cost-state"] == 1
    session = Session.objects.get(pk=body["session"])
    assert session.source == "imported" and session.title == "imported: fix parser bug 3"
    compactions = list(Compaction.objects.filter(session=session).order_by("rollout_seq"))
    assert [(c.trigger, c.phase, c.implementation) for c in compactions] == [
        ("auto", "mid_turn", "responses"), ("manual", "standalone_turn", "responses")]
    assert compactions[0].summary.endswith("Goals: fix parser bug 3; write the loader docs.")
    assert compactions[0].tokens_before > compactions[0].tokens_after > 0
    live = [i["type"] for i in selectors.live_items(session=session)]
    assert live == ["message", "message", "message"]  # the manual summary, then the last prompt and answer
    assert verify_projection(session=session) == []

    export = operator_api.get(f"/api/v1/sessions/{session.pk}/export")
    assert export.status_code == 200 and NAME in export["Content-Disposition"]
    assert b"".join(export.streaming_content) == data


def test_a_claude_transcript_already_imported_is_refused_and_a_strict_import_names_its_bad_line(
    operator_api, provider, policy
):
    data = conversation_with_two_compactions().bytes()
    assert _import(operator_api, data).status_code == 201
    again = _import(operator_api, data)
    assert again.status_code == 409, again.content
    broken = data + b'{"type":"user","message":\n'
    strict = _import(operator_api, broken, strict="true", new_thread_id="true")
    assert strict.status_code == 400, strict.content
    (bad,) = strict.json()["error"]["lines"]
    assert bad["line"] == len(data.splitlines()) + 1 and "cut short" in bad["message"]


def test_the_inspector_and_the_fleet_show_an_imported_claude_session(client, operator_user, operator_api, provider,
                                                                     policy):
    body = _import(operator_api, conversation_with_two_compactions().bytes()).json()
    client.force_login(operator_user)
    page = client.get(f"/sessions/{body['session']}/")
    assert page.status_code == 200 and b"fix parser bug 3" in page.content
    compaction = Compaction.objects.filter(session_id=body["session"]).first()
    detail = client.get(f"/compactions/{compaction.pk}/")
    assert detail.status_code == 200 and b"write the loader docs" in detail.content
    fleet = client.get("/")
    assert fleet.status_code == 200 and b"imported: fix parser bug 3" in fleet.content


def test_a_claude_sessions_tokens_say_which_the_server_reported_and_which_are_estimates(
    client, operator_user, operator_api, provider, policy
):
    transcript = conversation_with_two_compactions()
    transcript.user("one more question")  # after the last answer: compactweb counts it itself
    body = _import(operator_api, transcript.bytes()).json()
    detail = operator_api.get(f"/api/v1/sessions/{body['session']}").json()
    counting = detail["token_counting"]
    # The last answer's usage: 100 fresh + 9000 read from the cache + 20 output, as Anthropic's server reported it.
    assert counting["server_reported"] == 9120 and counting["estimator"] == "o200k_base"
    assert counting["estimated"] > 0 and counting["server_reported"] + counting["estimated"] == detail["tokens_in_window"]
    assert "do not use tiktoken" in counting["note"]
    client.force_login(operator_user)
    page = client.get(f"/sessions/{body['session']}/").content.decode()
    assert "Claude Code transcript" in page and "9,120 reported by Anthropic" in page and "estimated with o200k_base" in page


def test_a_codex_sessions_detail_has_no_claude_counting_note(operator_api, make_session):
    session = make_session(title="native")
    assert operator_api.get(f"/api/v1/sessions/{session.pk}").json()["token_counting"] is None


def test_the_import_page_takes_a_claude_code_transcript_and_opens_its_session(client, operator_user, provider, policy):
    operator_client = client
    operator_client.force_login(operator_user)
    assert "Claude Code transcript" in operator_client.get("/import/").content.decode()
    response = operator_client.post("/import/", {
        "file": SimpleUploadedFile(NAME, conversation_with_two_compactions().bytes()),
        "provider": provider.pk, "policy": policy.pk,
    })
    session = Session.objects.get(source="imported")
    assert response.status_code == 302 and response["Location"] == f"/sessions/{session.pk}/"
    assert str(session.thread_id) == SESSION and Compaction.objects.filter(session=session).count() == 2


def test_thinking_blocks_are_kept_verbatim_shown_on_the_page_and_left_out_of_the_history(
    client, operator_user, operator_api, provider, policy
):
    transcript = conversation_with_two_compactions()
    thought = "The user wants <script>alert(1)</script> escaped; check the loader first."
    transcript.assistant([{"type": "thinking", "thinking": thought, "signature": "sig"}, text("Checked.")],
                         message_id="msg_7")
    transcript.assistant([{"type": "redacted_thinking", "data": "opaque"}, text("Done.")], message_id="msg_8")
    data = transcript.bytes()
    body = _import(operator_api, data).json()

    history = operator_api.get(f"/api/v1/sessions/{body['session']}/history").json()["items"]
    assert "loader first" not in str(history) and "opaque" not in str(history)
    assert any("Checked." in str(item) for item in history)
    assert b"".join(x.encode() for x in exporter.export_rollout(
        session=Session.objects.get(pk=body["session"]))) == data  # kept verbatim in the file
    client.force_login(operator_user)
    page = client.get(f"/sessions/{body['session']}/").content.decode()
    assert "Thinking: the newest 2 blocks" in page
    assert "The user wants &lt;script&gt;alert(1)&lt;/script&gt; escaped; check the loader first." in page
    assert "<script>alert(1)" not in page
    assert "redacted by the server" in page
