"""Codex's error texts (spec §4 step 6, §4.3 step 4, §11) where a user reads them: the API answer, the rollout's
`error` line and a failed turn, on the scripted provider."""

from __future__ import annotations

import pytest

from tests.fakes.scripted_api import text_reply
from tests.fakes.scripted_provider import Reply, assistant, completed, created, output_item_done

pytestmark = pytest.mark.django_db

PREFIX = "Error running remote compact task: "
CLOSED = "remote compaction v2 stream closed before response.completed"


def error_lines(scripted_sessions, sid):
    return [line["payload"] for line in scripted_sessions.rollout(sid)
            if line["type"] == "event_msg" and line["payload"]["type"] == "error"]


def seeded(scripted_sessions, **provider_fields):
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
             assistant("on it")]
    return scripted_sessions.create(items=items, provider_fields=provider_fields)


def test_a_failed_remote_compaction_is_answered_and_persisted_with_codex_wording(scripted_sessions):
    script = scripted_sessions.script
    session = seeded(scripted_sessions)
    script.add(Reply.sse([created(), output_item_done({"type": "compaction", "encrypted_content": "a"}),
                          output_item_done({"type": "compaction", "encrypted_content": "b"}, 1), completed()]))

    response = scripted_sessions.api.post(f"/api/v1/sessions/{session['id']}/compact", {"strategy": "remote_v2"},
                                          format="json")

    assert response.status_code == 502
    expected = PREFIX + "remote compaction v2 expected exactly one compaction output item, got 2 from 2 output items"
    assert response.json()["error"]["message"] == expected
    (line,) = error_lines(scripted_sessions, session["id"])
    assert line["message"] == expected and line["codex_error_info"] == "fatal"


def test_a_v2_stream_closed_early_surfaces_the_v2_message_after_the_capped_retries(scripted_sessions):
    script = scripted_sessions.script
    session = seeded(scripted_sessions, stream_max_retries=5)
    early = Reply.sse([created(), output_item_done({"type": "compaction", "encrypted_content": "x"}), completed()],
                      close_after=2)
    script.add(early, early, early, early)

    response = scripted_sessions.api.post(f"/api/v1/sessions/{session['id']}/compact", {"strategy": "remote_v2"},
                                          format="json")

    assert response.status_code == 502
    assert response.json()["error"]["message"] == PREFIX + CLOSED
    assert len(script.requests) == 3  # min(stream_max_retries, 2) retries (spec §4.3 step 5)
    assert error_lines(scripted_sessions, session["id"])[-1]["message"] == PREFIX + CLOSED


def test_a_failed_pre_turn_remote_compaction_ends_the_turn_with_codex_wording(scripted_sessions):
    script = scripted_sessions.script
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x " * 3000}]}]
    session = scripted_sessions.create(items=items, policy_fields={"auto_compact_token_limit": 500})
    script.add(Reply.error(400, {"error": {"code": "invalid_request_error", "message": "bad input"}}),
               text_reply("never sent"))

    data = scripted_sessions.turn(session["id"], "next")

    assert data["status"] == "failed" and not data["user_input_recorded"]
    assert data["error"]["message"].startswith(PREFIX) and data["error"]["message"].endswith("bad input")
    assert data["compactions"][0]["error"] == data["error"]["message"]
    assert len(script.requests) == 1
